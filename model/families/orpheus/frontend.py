"""Orpheus prompt preparation: text and voice → token ids (runs in the API process)."""
from __future__ import annotations

from pathlib import Path

from tokenizers import Tokenizer

from model.families.base import AUTO_LANGUAGE, PromptFrontend, PromptTooLong, SpeechPrompt, VoiceNotFoundError
from model.families.orpheus.layout import ENGLISH_VOICES, OrpheusTokenLayout
from model.sampling import SamplingParams


class OrpheusFrontend(PromptFrontend):
    """Builds `[start_of_human] + tokenize("{voice}: {text}") + [eot, end_of_human, start_of_ai,
    start_of_speech]`; the tokenizer adds BOS through its own post-processor, as Llama 3's does.
    English only; instructions are accepted and ignored."""

    languages = (AUTO_LANGUAGE, "english")

    def __init__(
        self,
        model_name: str,
        tokenizer: Tokenizer,
        layout: OrpheusTokenLayout,
        voices: tuple[str, ...] = ENGLISH_VOICES,
        sample_rate: int = 24000,
    ) -> None:
        self.model_name = model_name
        self.tokenizer = tokenizer
        self.layout = layout
        self.voices = voices
        self.sample_rate = sample_rate

    @classmethod
    def from_folder(cls, model_name: str, path: Path, chorus_section: dict) -> "OrpheusFrontend":
        tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        voices = tuple(chorus_section.get("voices", ENGLISH_VOICES))
        return cls(model_name, tokenizer, OrpheusTokenLayout.from_config(chorus_section), voices)

    def prepare(self, text: str, voice: str, speed: float = 1.0, max_tokens: int | None = None, *,
                language: str | None = None, instructions: str | None = None) -> SpeechPrompt:
        # NOTE: Orpheus has no rate control (speed_range (1, 1)): the API time-stretches.
        if voice not in self.voices:
            raise VoiceNotFoundError(voice, self.voices)
        self.check_language(language)
        text_ids = self.tokenizer.encode(f"{voice}: {text}").ids
        lay = self.layout
        ids = [lay.start_of_human, *text_ids, lay.eot_id, lay.end_of_human, lay.start_of_ai, lay.start_of_speech]
        if max_tokens is not None and len(ids) > max_tokens:
            raise PromptTooLong(len(ids), max_tokens)
        return SpeechPrompt(token_ids=ids, cache_salt=self.model_name, num_text_tokens=len(text_ids))

    def default_sampling(self) -> SamplingParams:
        # NOTE: repetition_penalty >= 1.1 is what keeps Orpheus out of loops (MODELS.md).
        return SamplingParams(temperature=0.6, top_p=0.9, repetition_penalty=1.1, max_tokens=4096)
