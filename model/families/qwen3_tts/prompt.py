"""A prepared Qwen3-TTS prompt: two input tracks per position (config.py says what each holds),
and the text the talker reads while it speaks."""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from model.families.base import SpeechPrompt

NO_TEXT = -1
# A codec-track entry: () nothing; (id,) a row of the talker's codec table; (SPEAKER_VECTOR,) the
# prompt's x-vector; a tuple of num_code_groups codes: a whole frame (in-context cloning).
SPEAKER_VECTOR = -2
CodecEntry = tuple[int, ...]


@dataclass(slots=True)
class Qwen3Prompt(SpeechPrompt):
    """Invariant: `text_ids` and `codec` have one entry per prompt position, as many as
    `token_ids` (whose values only key the prefix cache: positions with equal keys under equal
    `cache_salt` have equal inputs); `speaker_vector` is set exactly when some codec entry is
    (SPEAKER_VECTOR,). `trailing_ids` are the text ids the talker reads at its decode positions,
    one per frame (the text not yet read in streaming mode, ending with tts_eos); past their end it
    reads tts_pad."""

    text_ids: list[int] = field(default_factory=list)
    codec: list[CodecEntry] = field(default_factory=list)
    trailing_ids: list[int] = field(default_factory=list)
    speaker_vector: torch.Tensor | None = None
    language: str = "auto"
    speaker: str | None = None
    instructions: str | None = None

    def __post_init__(self) -> None:
        n = len(self.token_ids)
        if len(self.text_ids) != n or len(self.codec) != n:
            raise ValueError(f"a Qwen3 prompt needs one text and one codec entry per position ({n}), "
                             f"got {len(self.text_ids)} and {len(self.codec)}")
        uses_vector = any(entry == (SPEAKER_VECTOR,) for entry in self.codec)
        if uses_vector != (self.speaker_vector is not None):
            raise ValueError("a speaker vector is given exactly when a position uses it")
