"""The interface between a model family's frames and PCM audio."""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Protocol, Sequence, runtime_checkable

import torch
from torch import Tensor


@dataclass(frozen=True, slots=True)
class WindowHints:
    """How this codec's frames are best streamed: the context its windows need (facts of its
    receptive field) and the chunk shape that suits its cost per window. Field for field the
    values the engine's StreamingConfig (engine/audio/config.py, which says what each means)
    takes when it does not set them, and the two slack levels CapacityConfig's
    (capacity/config.py); they validate the result. The defaults were tuned for SNAC
    (the Orpheus codec)."""

    first_chunk_frames: int = 1
    chunk_frames: int = 4
    urgent_slack_seconds: float = 0.5
    grow_chunks: bool = False
    # A window costs the same whichever step runs it; one whose listener holds a second of
    # audio can wait a few steps without harm.
    defer_slack_seconds: float = 1.0
    left_context_frames: int = 3
    # SNAC's decoder sees about 2.5 frames either side: with 1 frame of lookahead a chunk's last
    # frame is off by up to 0.1 (signal std ~0.1) until the crossfade hides it; with 2 the error
    # drops ~50x (measured in tests/engine/audio/test_decoder.py), for 85 ms more before the
    # first audio.
    lookahead_frames: int = 2
    first_lookahead_frames: int = 2
    crossfade_samples: int = 256


class IncrementalDecoder(Protocol):
    """Decodes a stream's frames piece by piece, each frame once, exactly as a whole decode: a
    stream's state holds what its next piece still needs. For stream b fed frames
    [frames_before[b], + n) now, `decode` returns the samples [frames_before[b] * spf -
    delay_samples, + n * spf) of the whole decode (samples before 0 are meaningless; once
    `totals[b]`, the stream's frame count, is given, frames past it are the whole decode's zero
    padding, so feeding ceil(delay_samples / spf) more frames of anything flushes its end). A
    state is opaque to the caller (tensors or host arrays, as the decoder runs)."""

    delay_samples: int

    def initial_state(self) -> list: ...

    def decode(self, frames: Tensor, states: Sequence[Sequence], frames_before: Sequence[int],
               totals: Sequence[int | None]) -> tuple[Tensor, list[list]]: ...


def lag_frames(incremental: IncrementalDecoder, samples_per_frame: int) -> int:
    """Whole frames the incremental decoder's audio lags the frames fed: what a flush feeds."""
    return -(-incremental.delay_samples // samples_per_frame)


@runtime_checkable
class SlottedDecoder(IncrementalDecoder, Protocol):
    """An incremental decoder with no lag (delay_samples 0) whose per-stream state is a fixed set
    of tensors, `state_shapes` ((shape, dtype) each, for one stream), all zeros before a stream's
    first frame: so a memory pool can own every stream's state (memory/state_slots.py) and `step`
    runs a batch of streams on their states gathered [B, *shape], returning the audio
    [B, n * samples_per_frame] and the states after it, batched alike."""

    def state_shapes(self) -> list[tuple[tuple[int, ...], torch.dtype]]: ...

    def step(self, frames: Tensor, frames_before: Tensor, states: Sequence[Tensor]) -> tuple[Tensor, list[Tensor]]: ...


_FEW_CODES = 256


def check_code_range(frames: Tensor, codebook_size: int) -> None:
    """Raises unless every code of `frames` lies in [0, codebook_size). An out-of-range index on a
    GPU is a device-side assert that poisons the whole process, so a codec refuses bad codes here,
    where they fail their own stream only."""
    if not frames.numel():
        return
    if frames.device.type == "cpu" and frames.numel() <= _FEW_CODES and not frames.is_floating_point():
        # A frame or two as the engine pushes them each step ([n, G]): Python's min and max over
        # the values cost less than a reduction's dispatch and two reads of its results.
        rows = frames.tolist() if frames.dim() == 2 else [frames.flatten().tolist()]
        low, high = min(map(min, rows)), max(map(max, rows))
    else:
        low, high = (int(bound) for bound in torch.aminmax(frames))  # one pass, one host sync
    if low < 0 or high >= codebook_size:
        raise ValueError(f"codes must lie in [0, {codebook_size}), got [{low}, {high}]")


class FrameCodec(ABC):
    """Turns frames (the model's per-step audio units: codes, latent vectors, ...) into PCM.
    `decode(frames [B, n, *frame_shape])` returns float32 audio [B, n * samples_per_frame] in
    [-1, 1], and frame i always maps to samples [i*samples_per_frame, (i+1)*samples_per_frame)
    of the decoded window, so windows of frames can be decoded and cropped by frame index;
    `window_hints` say how such windows are best cut for this codec."""

    sample_rate: int
    samples_per_frame: int
    frame_shape: tuple[int, ...]
    frame_dtype: torch.dtype
    window_hints: WindowHints = WindowHints()
    # Set by codecs that can also decode a stream incrementally (each frame once, no window
    # context paid again); the engine's CPU path then does (engine/audio/decoder.py).
    incremental: IncrementalDecoder | None = None

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
