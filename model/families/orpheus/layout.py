"""Where Orpheus keeps its special and audio tokens in the vocabulary."""
from __future__ import annotations

from dataclasses import dataclass

import torch

FRAME_TOKENS = 7
ENGLISH_VOICES = ("tara", "leah", "jess", "leo", "dan", "mia", "zac", "zoe")


@dataclass(slots=True, frozen=True)
class OrpheusTokenLayout:
    """Special tokens sit at fixed offsets above the text vocabulary (`special_base`, 128256 in
    Orpheus 3B); audio token `audio_offset + p * codebook_size + code` carries `code` for position
    p (0..6) of a 7-token frame. A checkpoint may override the layout in config.json under
    `"chorus": {"special_base", "codebook_size", "eot_id", "voices"}` (the tiny test models do)."""

    special_base: int = 128256
    codebook_size: int = 4096
    eot_id: int = 128009

    @property
    def start_of_speech(self) -> int:
        return self.special_base + 1

    @property
    def end_of_speech(self) -> int:
        return self.special_base + 2

    @property
    def start_of_human(self) -> int:
        return self.special_base + 3

    @property
    def end_of_human(self) -> int:
        return self.special_base + 4

    @property
    def start_of_ai(self) -> int:
        return self.special_base + 5

    @property
    def audio_offset(self) -> int:
        return self.special_base + 10

    @property
    def vocab_end(self) -> int:
        return self.audio_offset + FRAME_TOKENS * self.codebook_size

    def frame_candidates(self, logits: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """[B, codebook_size + 1] token ids: the audio tokens valid at each stream's next frame
        position (`positions` [B]), then end_of_speech. Ending is allowed only on a frame boundary
        (so no half frame is left behind): elsewhere the end_of_speech logit is set to -inf, in
        place. Fixed shapes and no host sync: the decode graph runs it too."""
        low = self.audio_offset + positions * self.codebook_size
        audio = low[:, None] + torch.arange(self.codebook_size, device=logits.device)
        logits[:, self.end_of_speech].masked_fill_(positions != 0, float("-inf"))
        end = torch.full_like(low, self.end_of_speech)[:, None]
        return torch.cat([audio, end], dim=1)

    def code_of(self, token_id: int, position: int) -> int | None:
        """The code a token carries at frame position `position`, or None if it is not a valid
        audio token there (the upstream `> 4096` check lets code 4096 through; this does not)."""
        code = token_id - self.audio_offset - position * self.codebook_size
        return code if 0 <= code < self.codebook_size else None

    @classmethod
    def from_config(cls, chorus_section: dict) -> "OrpheusTokenLayout":
        return cls(
            special_base=int(chorus_section.get("special_base", 128256)),
            codebook_size=int(chorus_section.get("codebook_size", 4096)),
            eot_id=int(chorus_section.get("eot_id", 128009)),
        )
