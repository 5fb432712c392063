"""One Qwen3-TTS request's state between steps: its frames so far and its two samplers."""
from __future__ import annotations

import numpy as np
import torch

from model.families.base import StreamState
from model.families.qwen3_tts.config import MIN_FRAMES, SamplingDefaults
from model.families.qwen3_tts.prompt import Qwen3Prompt
from model.sampling import SamplingParams, SamplingState

# The most fillers (tts_pad) a live stream reads in a row while it waits for text: 2 s of audio at
# 12.5 frames a second. The model speaks the text it has read a few frames behind its reading
# (that is what it does after the end of a whole text), so a listener hears no gap between words
# that come slower than the model reads them; past this its backlog is surely spoken, and it waits.
MAX_FILLS_IN_A_ROW = 25


def sub_talker_params(params: SamplingParams, defaults: SamplingDefaults) -> SamplingParams:
    """The code predictor's sampling for a request: the checkpoint's sub-talker settings; greedy
    when the request is greedy (temperature 0 asks for a deterministic voice, all codes included),
    and seeded from the request's seed so that a seeded request repeats exactly."""
    if params.greedy or not defaults.subtalker_dosample:
        return SamplingParams(temperature=0.0, max_tokens=params.max_tokens)
    return SamplingParams(
        temperature=defaults.subtalker_temperature, top_k=defaults.subtalker_top_k, top_p=defaults.subtalker_top_p,
        seed=None if params.seed is None else params.seed + 1, max_tokens=params.max_tokens,
    )


class Qwen3Stream(StreamState):
    """Invariant: `frames[:num_frames]` are the accepted frames in order ([n, G] codes), and the
    talker's input at position prompt_len + k (k < num_frames) is frame k's embedding plus the
    text id `trailing_id(k)` (for live text, only once that text has arrived, or a filler has
    taken its place: until then `needs_text`); `trailing` is exactly what was read, fillers
    included. `sampling` sees code 0 only (its repetition penalty, as the
    reference's, covers the codes 0 generated so far); `depth_sampling` draws codes 1..G-1."""

    def __init__(self, prompt: Qwen3Prompt, params: SamplingParams, defaults: SamplingDefaults,
                 num_code_groups: int, tts_pad: int, device: torch.device) -> None:
        params = params.replace(min_tokens=max(params.min_tokens, min(MIN_FRAMES, params.max_tokens)))
        super().__init__(prompt, params)
        self.sampling = SamplingState(params, (), device=device)
        self.depth_sampling = SamplingState(sub_talker_params(params, defaults), (), device=device)
        self._set_frames(np.empty((16, num_code_groups), dtype=np.int64))
        self.tts_pad = tts_pad
        # The text read at decode positions: the prompt's, then (live text) each piece extended.
        self.trailing = list(prompt.trailing_ids)
        self.text_complete = prompt.text_complete
        self.fills_in_a_row = 0

    @property
    def qwen3_prompt(self) -> Qwen3Prompt:
        return self.prompt  # type: ignore[return-value]

    def trailing_id(self, frame: int) -> int:
        if frame >= len(self.trailing) and not self.text_complete:
            raise RuntimeError(f"frame {frame}'s text has not arrived: the stream should be waiting for it")
        return self.trailing[frame] if frame < len(self.trailing) else self.tts_pad

    def extend_text(self, text_ids: list[int], final: bool, tts_eos: int) -> None:
        if self.text_complete:
            raise ValueError("this stream's text is complete: it was prepared whole, or its last piece came")
        self.trailing += text_ids
        self.fills_in_a_row = 0
        if final:
            self.trailing.append(tts_eos)
            self.text_complete = True

    @property
    def needs_text(self) -> bool:
        """Its next input (frame num_frames - 1's, read with that frame's text) waits for text."""
        return not self.text_complete and len(self.trailing) < self.num_frames

    @property
    def can_fill(self) -> bool:
        """Whether it waits for text and may read tts_pad there (MAX_FILLS_IN_A_ROW)."""
        return self.needs_text and self.fills_in_a_row < MAX_FILLS_IN_A_ROW

    def fill(self) -> None:
        """Reads tts_pad where the text it waits for would go: the model reads pads after a whole
        text's end, and goes on speaking meanwhile."""
        if not self.can_fill:
            raise ValueError("the stream does not wait for text, or has read all the fillers it may in a row")
        self.trailing.append(self.tts_pad)
        self.fills_in_a_row += 1

    def _set_frames(self, codes: np.ndarray) -> None:
        """`frames` and the NumPy array that owns its memory (`append_frame` writes there)."""
        self._codes = codes
        self.frames = torch.from_numpy(codes)

    def append_frame(self, codes: list[int]) -> torch.Tensor:
        if self.num_frames == len(self._codes):
            grown = np.empty((2 * self.num_frames, self._codes.shape[1]), dtype=np.int64)
            grown[: self.num_frames] = self._codes
            self._set_frames(grown)
        # NOTE: through the NumPy array, a list of ints lands in the row without a temporary tensor
        # and without a `Tensor.numpy()` call (a detach) per frame: the engine accepts one frame
        # per stream per step.
        self._codes[self.num_frames] = codes
        self.num_frames += 1
        return self.frames[self.num_frames - 1 : self.num_frames]

    def frame_codes(self, frame: int) -> list[int]:
        """Frame `frame`'s codes as a list (read from the NumPy array: no tensor call per row)."""
        return self._codes[frame].tolist()
