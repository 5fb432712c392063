"""The interface between a model family's frames and PCM audio."""
from __future__ import annotations

from abc import ABC, abstractmethod

import torch
from torch import Tensor


class FrameCodec(ABC):
    """Turns frames (the model's per-step audio units: codes, latent vectors, ...) into PCM.
    `decode(frames [B, n, *frame_shape])` returns float32 audio [B, n * samples_per_frame] in
    [-1, 1], and frame i always maps to samples [i*samples_per_frame, (i+1)*samples_per_frame)
    of the decoded window, so windows of frames can be decoded and cropped by frame index."""

    sample_rate: int
    samples_per_frame: int
    frame_shape: tuple[int, ...]
    frame_dtype: torch.dtype

    @abstractmethod
    def decode(self, frames: Tensor) -> Tensor: ...

    def decode_trusted(self, frames: Tensor) -> Tensor:
        """`decode` of frames that already passed `check_frames` (the streaming decoder checks
        every frame when it is pushed): without the checks, whose host synchronisation a CUDA
        graph cannot capture. By default the same as `decode`."""
        return self.decode(frames)

    def check_frames(self, frames: Tensor, leading_dims: int) -> None:
        # Raises on frames a decode would refuse (subclasses add value checks), so that callers
        # can reject one stream's frames when they arrive instead of failing a whole batch.
        if frames.dim() != leading_dims + len(self.frame_shape) or tuple(
            frames.shape[leading_dims:]
        ) != tuple(self.frame_shape):
            expected = ", ".join(["*"] * leading_dims + [str(d) for d in self.frame_shape])
            raise ValueError(f"frames must be [{expected}], got {list(frames.shape)}")
