"""Qwen3-TTS prompt preparation: text, voice, language and instructions → Qwen3Prompt (runs in
the API process: a tokenizer and the checkpoint's config.json, no weights).

Voices by checkpoint type:
- custom_voice: the checkpoint's named speakers (spelled as its config.json spells them, matched
  case-insensitively as the reference matches them); instructions are optional (style, emotion),
  and dropped where the reference drops them (`drops_instructions`: the 0.6B checkpoints);
- voice_design: one voice, "designed": the required instructions describe the voice itself;
- base: no voices of its own: `prepare_clone` takes a speaker vector (and, for in-context
  cloning, a reference clip's transcript and codes); instructions are refused.
"""
from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import torch

from model.codecs.qwen3_12hz_config import Qwen3CodecConfig
from model.families.base import (BadInstructions, LanguageNotSupported, PromptFrontend, PromptTooLong,
                                 VoiceNotFoundError)
from model.families.cloning import ClonedVoice, CloneRefused
from model.families.qwen3_tts.cloner import CODES_ARRAY, VECTOR_ARRAY, Qwen3Cloner
from model.families.qwen3_tts.config import CODEC_FOLDER, MIN_FRAMES, Qwen3TtsConfig
from model.families.qwen3_tts.layout import ReferenceClip, Tracks, build_tracks, resolve_language_id
from model.families.qwen3_tts.prompt import SPEAKER_VECTOR, Qwen3Prompt
from model.families.qwen3_tts.tokenizer import Qwen3TextTokenizer
from model.sampling import SamplingParams

__all__ = ["BadInstructions", "LanguageNotSupported", "Qwen3Frontend", "DESIGNED_VOICE"]

DESIGNED_VOICE = "designed"
DEFAULT_SAMPLE_RATE = 24000  # the 12 Hz codec's, for a folder without its codec (tests)
# The reference's generate_custom_voice drops a custom-voice checkpoint's instructions when
# `tts_model_size in "0b6"`, the 0.6B checkpoints' tag (not trained on instructions): a substring
# test, so for every substring of it ("", "0", "b", "6", "0b", "b6", "0b6") and no other size.
SIZE_WITHOUT_INSTRUCTIONS = "0b6"


class Qwen3Frontend(PromptFrontend):
    """Text → Qwen3Prompt for one checkpoint. Invariant: `voices` are exactly the voices `prepare`
    accepts (compared case-insensitively), and every prompt's cache salt names the model and,
    for a clone, digests its speaker vector and reference frames."""

    def __init__(self, model_name: str, config: Qwen3TtsConfig, tokenizer: Qwen3TextTokenizer, *,
                 sample_rate: int = DEFAULT_SAMPLE_RATE, path: Path | None = None) -> None:
        self.model_name = model_name
        self.path = path  # the checkpoint folder, where a base checkpoint's cloner loads its encoders
        self.clones = config.model_type == "base" and path is not None
        self._cloner: Qwen3Cloner | None = None
        self.config = config
        self.tokenizer = tokenizer
        self.sample_rate = sample_rate
        self.reads_instructions = config.model_type != "base" and not drops_instructions(config)
        for speaker, dialect in config.speaker_dialects.items():
            if dialect and str(dialect).lower() not in config.languages:
                raise ValueError(f"speaker {speaker!r} speaks dialect {dialect!r}, which has no language id")
        if config.model_type == "custom_voice":
            display = {name.lower(): name for name in config.speaker_names}
            self.voices = tuple(display.get(key, key) for key in config.speakers)
        else:
            self.voices = (DESIGNED_VOICE,) if config.model_type == "voice_design" else ()
        self._voice_by_key = {voice.lower(): voice for voice in self.voices}

    @classmethod
    def from_folder(cls, model_name: str, path: Path, text_split: str = "auto") -> Qwen3Frontend:
        codec = path / CODEC_FOLDER
        sample_rate = Qwen3CodecConfig.from_folder(codec).sample_rate if codec.is_dir() else DEFAULT_SAMPLE_RATE
        return cls(model_name, Qwen3TtsConfig.load(path), Qwen3TextTokenizer.from_folder(path, text_split),
                   sample_rate=sample_rate, path=path)

    def voice_cloner(self) -> Qwen3Cloner:
        if not self.clones or self.path is None:
            return super().voice_cloner()  # type: ignore[return-value]
        if self._cloner is None:
            self._cloner = Qwen3Cloner(self.model_name, self.path, self.config)
        return self._cloner

    @property
    def languages(self) -> tuple[str, ...]:
        return self.config.public_languages

    def prepare(self, text: str, voice: str, speed: float = 1.0, max_tokens: int | None = None, *,
                language: str | None = None, instructions: str | None = None,
                non_streaming: bool = True, clone: ClonedVoice | None = None, live: bool = False) -> Qwen3Prompt:
        """A prompt in one of the checkpoint's own voices. `max_tokens` bounds the prompt's
        positions plus the text read while speaking (streaming mode moves text from the first to
        the second; either way it is the text's share of the context). `non_streaming` defaults
        as the reference's custom-voice and voice-design generation do: the whole text in the
        prompt (streaming mode is for text that arrives while the voice speaks). `clone`: a voice
        this checkpoint's cloner made (`voice` is then its id), laid out as `prepare_clone` lays
        it out by default, as the reference's generate_voice_clone does (`non_streaming` is for
        the checkpoint's own voices). `live`: `text` is what has arrived so far, read in streaming
        mode, and the rest follows through the family's `extend_text` (`live_text_ids`)."""
        if clone is not None:
            return self._prepare_cloned(text, clone, max_tokens, language, live)
        # NOTE: no rate control (speed_range (1, 1)): the API time-stretches.
        instructions = self._effective_instructions(instructions)
        voice_name = self._voice_by_key.get(voice.lower())
        if voice_name is None:
            raise VoiceNotFoundError(voice, self.voices)
        speaker_key = voice_name.lower() if self.config.model_type == "custom_voice" else None
        language_id = resolve_language_id(self.config, language, speaker_key)
        assistant = self.tokenizer.assistant(text)
        tracks = build_tracks(
            self.config, assistant.role, assistant.text,
            instruction_ids=self.tokenizer.instruction(instructions) if instructions else (),
            language_id=language_id,
            speaker=(self.config.speakers[speaker_key],) if speaker_key else (),
            non_streaming=non_streaming and not live,
        )
        self._check_length(tracks, max_tokens)
        return self._prompt(tracks, len(assistant.text), self.model_name, language, live, speaker=voice_name,
                            instructions=instructions)

    def prepare_clone(self, text: str, *, speaker_vector: torch.Tensor, reference_text: str | None = None,
                      reference_codes: torch.Tensor | Sequence[Sequence[int]] | None = None,
                      language: str | None = None, non_streaming: bool = False,
                      max_tokens: int | None = None, live: bool = False) -> Qwen3Prompt:
        """A base checkpoint's prompt in a cloned voice: x-vector only without a reference clip,
        in-context (the talker continues the clip) with both its transcript and its codes
        [frames, num_code_groups]. `max_tokens` as in `prepare`."""
        if self.config.model_type != "base":
            raise ValueError(f"only a base checkpoint clones voices; {self.model_name} is {self.config.model_type}")
        if (reference_text is None) != (reference_codes is None):
            raise ValueError("in-context cloning needs both reference_text and reference_codes; give neither "
                             "for x-vector cloning")
        if live and reference_text is not None:
            # NOTE: its prompt pairs the text with the reference frames, so it needs the whole text.
            raise ValueError("an in-context clone reads its text alongside the reference clip: it takes no live text")
        # NOTE: a float32 CPU copy: the prompt crosses to the engine as a numpy array (no bfloat16),
        # and the caller's tensor may change after its digest is taken.
        vector = speaker_vector.detach().to("cpu", torch.float32, copy=True)
        if vector.shape != (self.config.talker.hidden_size,):
            raise ValueError(f"speaker_vector must have shape ({self.config.talker.hidden_size},), "
                             f"got {tuple(vector.shape)}")
        language_id = resolve_language_id(self.config, language)
        assistant = self.tokenizer.assistant(text)
        salt = hashlib.sha256(vector.contiguous().numpy().tobytes())
        reference = None
        if reference_text is not None:
            codes = torch.as_tensor(reference_codes, dtype=torch.int64)
            if codes.ndim != 2:
                raise ValueError(f"reference_codes must be [frames, codes per frame], got shape {tuple(codes.shape)}")
            reference = ReferenceClip(self.tokenizer.reference_text(reference_text), [tuple(f) for f in codes.tolist()])
            salt.update(codes.contiguous().numpy().tobytes())
        tracks = build_tracks(self.config, assistant.role, assistant.text, language_id=language_id,
                              speaker=(SPEAKER_VECTOR,), non_streaming=non_streaming and not live, reference=reference)
        # NOTE: the reference clip's positions are the voice's, the same for every request in it
        # (bounded by the voice library's clip limit): `max_tokens` bounds the text's share.
        self._check_length(tracks, max_tokens, 0 if reference is None else len(reference.text_ids) + len(reference.frames))
        # NOTE: the reference decodes the clip's codes ahead of the speech's and cuts them off, so
        # its codec speaks from the state the clip leaves: the engine's codec starts from it too.
        return self._prompt(tracks, len(assistant.text), f"{self.model_name}:clone:{salt.hexdigest()}", language,
                            live, speaker_vector=vector, codec_prefix=None if reference is None else codes)

    def _prepare_cloned(self, text: str, clone: ClonedVoice, max_tokens: int | None,
                        language: str | None, live: bool) -> Qwen3Prompt:
        if clone.model != self.model_name:
            raise CloneRefused(f"the voice was cloned for the model {clone.model}, not {self.model_name}", param="voice")
        if not self.clones:
            raise CloneRefused(f"the model {self.model_name} cannot clone voices", param="voice")
        codes = clone.arrays.get(CODES_ARRAY)
        return self.prepare_clone(text, speaker_vector=torch.from_numpy(clone.arrays[VECTOR_ARRAY]),
                                  reference_text=clone.transcript,
                                  reference_codes=None if codes is None else torch.from_numpy(codes),
                                  language=language, max_tokens=max_tokens, live=live)

    def default_sampling(self) -> SamplingParams:
        """The checkpoint's generation_config.json for code 0 (the code predictor's own sampling
        stays with the family); do_sample false is greedy."""
        s = self.config.sampling
        return SamplingParams(temperature=s.temperature if s.do_sample else 0.0, top_k=s.top_k, top_p=s.top_p,
                              repetition_penalty=s.repetition_penalty, max_tokens=s.max_new_tokens,
                              min_tokens=min(MIN_FRAMES, s.max_new_tokens))

    def _effective_instructions(self, instructions: str | None) -> str | None:
        """The instructions the prompt carries: None for blank ones (as the reference drops empty
        ones) and for a custom voice that drops them (as the reference does, silently);
        BadInstructions for a base checkpoint (the reference's clones take none) or a designed
        voice without them."""
        given = instructions if instructions and instructions.strip() else None
        if self.config.model_type == "voice_design" and given is None:
            raise BadInstructions("a voice_design checkpoint needs `instructions` describing the voice")
        if given is not None and self.config.model_type == "base":
            raise BadInstructions(f"{self.model_name} (base) does not read `instructions`")
        return given if self.reads_instructions else None

    @staticmethod
    def _check_length(tracks: Tracks, max_tokens: int | None, voice_positions: int = 0) -> None:
        tokens = len(tracks.keys) + len(tracks.trailing_ids) - voice_positions
        if max_tokens is not None and tokens > max_tokens:
            raise PromptTooLong(tokens, max_tokens)

    def _prompt(self, tracks: Tracks, num_text_tokens: int, cache_salt: str, language: str | None, live: bool,
                **fields) -> Qwen3Prompt:
        # Live text: the trailing text stops where the text so far does; tts_eos comes with the last piece.
        trailing = tracks.trailing_ids[:-1] if live else tracks.trailing_ids
        return Qwen3Prompt(token_ids=tracks.keys, cache_salt=cache_salt, num_text_tokens=num_text_tokens,
                           text_ids=tracks.text_ids, codec=tracks.codec, trailing_ids=trailing,
                           language=(language or "auto").lower(), text_complete=not live, **fields)

    def takes_live_text(self, clone: ClonedVoice | None = None) -> bool:
        # Streaming mode reads one text id a frame; an in-context clone pairs its text with the
        # reference frames in the prompt, so it needs the whole text.
        return clone is None or clone.mode != "in_context"

    def live_text_ids(self, text: str) -> list[int]:
        return self.tokenizer.encode(text)


def drops_instructions(config: Qwen3TtsConfig) -> bool:
    """Whether the reference drops this checkpoint's instructions (SIZE_WITHOUT_INSTRUCTIONS). A
    size that is not a string (absent: None) makes the reference's test raise TypeError, so it
    speaks no custom voice of that checkpoint at all; Chorus reads them there, as the reference's
    model reads the instruction ids it is given."""
    return (config.model_type == "custom_voice" and isinstance(config.model_size, str)
            and config.model_size in SIZE_WITHOUT_INSTRUCTIONS)
