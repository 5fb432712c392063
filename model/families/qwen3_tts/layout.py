"""Where each input of a Qwen3-TTS prompt goes: the text and codec tracks per position, the text
read while speaking, and each position's prefix-cache key. Pure: ids in, ids out, no weights.

Every mode shares one head, after which the text is laid out in one of four ways:

    instruction turn    text: the user turn's ids            codec: nothing
    role                text: <|im_start|> assistant \\n       codec: nothing
    tags                text: tts_pad ...                     codec: think or nothink, think_bos,
                                                                     [language], think_eos,
                                                                     [speaker]
    codec pad           text: tts_bos                         codec: pad

    streaming           text: first text id                   codec: bos
                        (trailing: the other text ids, tts_eos)
    non-streaming       text: each text id, tts_eos           codec: pad each
                        text: tts_pad                         codec: bos
    in-context,         text: reference text ids, text ids, tts_eos, paired one to one with
      streaming         codec: bos, each reference frame; the shorter side padded (text with
                        tts_pad), the text beyond the codec side left trailing
    in-context,         text: reference text ids, text ids, tts_eos   codec: pad each
      non-streaming     text: tts_pad each                    codec: bos, each reference frame
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from model.families.base import AUTO_LANGUAGE, LanguageNotSupported
from model.families.qwen3_tts.config import Qwen3TtsConfig
from model.families.qwen3_tts.prompt import SPEAKER_VECTOR, CodecEntry

# A position's key is (text id + 1) << 32 | codec key, so that no text id and no codec entry share
# bits. Codec keys: 0 for no codec input, codec id + 1 for a row of the talker's table, then the
# x-vector and reference frames (by their index in the clip), whose contents the cache salt
# carries (two clones with different vectors or frames never share a salt).
TEXT_SHIFT = 32
SPEAKER_VECTOR_KEY = 1 << 31
FIRST_FRAME_KEY = SPEAKER_VECTOR_KEY + 1
# The reference switches a dialect speaker to its dialect only for these requested languages.
DIALECT_LANGUAGES = ("chinese", AUTO_LANGUAGE)


def resolve_language_id(config: Qwen3TtsConfig, language: str | None, speaker: str | None = None) -> int | None:
    """The codec language tag for a request: None for auto (no tag), else the named language's id;
    a dialect speaker (named, lower-case) asked for chinese or auto speaks its dialect instead."""
    name = (language or AUTO_LANGUAGE).lower()
    if name not in config.public_languages:
        raise LanguageNotSupported(language or AUTO_LANGUAGE, config.public_languages)
    dialect = config.speaker_dialects.get(speaker, False) if speaker else False
    if dialect and name in DIALECT_LANGUAGES:
        return config.languages[str(dialect).lower()]
    return None if name == AUTO_LANGUAGE else config.languages[name]


@dataclass(frozen=True, slots=True)
class ReferenceClip:
    """In-context cloning's reference: its transcript's ids and its frames (each a tuple of
    num_code_groups codes), which the talker continues from."""

    text_ids: list[int]
    frames: list[CodecEntry]


@dataclass(slots=True)
class Tracks:
    """A laid-out prompt. Invariant: `text_ids`, `codec` and `keys` have one entry per position;
    equal keys mean equal inputs as long as the x-vector and reference frames are fixed."""

    text_ids: list[int] = field(default_factory=list)
    codec: list[CodecEntry] = field(default_factory=list)
    keys: list[int] = field(default_factory=list)
    trailing_ids: list[int] = field(default_factory=list)
    _frames_placed: int = field(default=0, repr=False)

    def put(self, text_id: int, entry: CodecEntry) -> None:
        if not entry:
            codec_key = 0
        elif entry == (SPEAKER_VECTOR,):
            codec_key = SPEAKER_VECTOR_KEY
        elif len(entry) == 1:
            codec_key = entry[0] + 1
        else:
            codec_key = FIRST_FRAME_KEY + self._frames_placed
            self._frames_placed += 1
        self.text_ids.append(text_id)
        self.codec.append(entry)
        self.keys.append((text_id + 1) << TEXT_SHIFT | codec_key)


def build_tracks(
    config: Qwen3TtsConfig,
    role_ids: Sequence[int],
    text_ids: Sequence[int],
    *,
    instruction_ids: Sequence[int] = (),
    language_id: int | None = None,
    speaker: CodecEntry = (),
    non_streaming: bool = False,
    reference: ReferenceClip | None = None,
) -> Tracks:
    """The prompt of `text_ids` (the user's text, without template) as the reference lays it out.
    `speaker`: () for none, (codec id,) for a named speaker, (SPEAKER_VECTOR,) for an x-vector."""
    if not text_ids:
        # NOTE: the reference would read the template's <|im_end|> as the first text token.
        raise ValueError("nothing to speak: the text has no tokens")
    valid_speaker = speaker in ((), (SPEAKER_VECTOR,)) or (
        len(speaker) == 1 and 0 <= speaker[0] < config.talker_vocab_size)
    if not valid_speaker:
        raise ValueError(f"a speaker entry is (codec id,) or (SPEAKER_VECTOR,), got {speaker}")
    if reference is not None:
        check_frames(config, reference.frames)
    codec, text = config.codec, config.text
    tracks = Tracks()
    for token in (*instruction_ids, *role_ids):
        tracks.put(token, ())
    tags = [codec.nothink, codec.think_bos, codec.think_eos] if language_id is None else \
        [codec.think, codec.think_bos, language_id, codec.think_eos]
    head = [(tag,) for tag in tags] + ([speaker] if speaker else []) + [(codec.pad,)]
    for entry in head[:-1]:
        tracks.put(text.tts_pad, entry)
    tracks.put(text.tts_bos, head[-1])

    if reference is not None:
        to_read = [*reference.text_ids, *text_ids, text.tts_eos]
        frames = [(codec.bos,), *reference.frames]
        if non_streaming:
            for token in to_read:
                tracks.put(token, (codec.pad,))
            for entry in frames:
                tracks.put(text.tts_pad, entry)
        else:
            # zip stops at the codec side; a shorter text side is padded with tts_pad.
            padded = to_read + [text.tts_pad] * (len(frames) - len(to_read))
            for token, entry in zip(padded, frames):
                tracks.put(token, entry)
            tracks.trailing_ids = to_read[len(frames):]
    elif non_streaming:
        for token in (*text_ids, text.tts_eos):
            tracks.put(token, (codec.pad,))
        tracks.put(text.tts_pad, (codec.bos,))
    else:
        tracks.put(text_ids[0], (codec.bos,))
        tracks.trailing_ids = [*text_ids[1:], text.tts_eos]
    return tracks


def check_frames(config: Qwen3TtsConfig, frames: list[CodecEntry]) -> None:
    """Refuses reference frames that are not whole frames of in-range codes."""
    if not frames:
        raise ValueError("in-context cloning needs at least one reference frame")
    for index, frame in enumerate(frames):
        if len(frame) != config.num_code_groups:
            raise ValueError(f"reference frame {index} has {len(frame)} codes; a frame has {config.num_code_groups}")
        if not all(0 <= code < config.predictor_vocab_size for code in frame):
            raise ValueError(f"reference frame {index} has a code outside [0, {config.predictor_vocab_size})")
