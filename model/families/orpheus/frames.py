"""Turns a stream of sampled Orpheus tokens into complete 7-code frames."""
from __future__ import annotations

from model.families.orpheus.layout import FRAME_TOKENS, OrpheusTokenLayout


class FrameAssembler:
    """Collects valid audio codes in order; every 7th completes a frame.

    Invariant: `len(self._pending) == self.num_valid % 7`. The frame position of a token is the
    count of valid codes before it, so an invalid token (a text token, or a code meant for another
    position) is dropped without shifting the positions of the tokens after it, as the reference
    decoder does.
    """

    def __init__(self, layout: OrpheusTokenLayout) -> None:
        self.layout = layout
        self.num_valid = 0
        self.num_invalid = 0
        self._pending: list[int] = []

    @property
    def position(self) -> int:
        return self.num_valid % FRAME_TOKENS

    def push(self, token_id: int) -> list[int] | None:
        """Returns the 7 codes of a frame when `token_id` completes one."""
        code = self.layout.code_of(token_id, self.position)
        if code is None:
            self.num_invalid += 1
            return None
        self._pending.append(code)
        self.num_valid += 1
        if len(self._pending) < FRAME_TOKENS:
            return None
        frame, self._pending = self._pending, []
        return frame
