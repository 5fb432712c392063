"""The codec's windows decoded on their own CUDA stream while the next LM step runs."""
from __future__ import annotations

from typing import Hashable

import numpy as np
import torch
from torch import Tensor

from engine.gpu_config import GpuConfig
from model.codecs.base import FrameCodec
from model.codecs.streaming import CodecRunner, PendingAudio, StreamChunk, StreamingDecoder


class CudaStreamRunner:
    """Decodes on a stream of its own, ordered after the work already queued on the caller's stream
    (which wrote the frames) and before nothing queued later; `to_host` waits for that decode only."""

    def __init__(self, device: torch.device) -> None:
        self.stream = torch.cuda.Stream(device)

    def decode(self, codec: FrameCodec, batch: Tensor) -> Tensor:
        self.stream.wait_stream(torch.cuda.current_stream(batch.device))
        # NOTE: the batch was allocated on the caller's stream; without this its memory could be
        # reused there while the codec still reads it.
        batch.record_stream(self.stream)
        with torch.cuda.stream(self.stream):
            return codec.decode(batch)

    def to_host(self, audio: Tensor) -> np.ndarray:
        with torch.cuda.stream(self.stream):
            return audio.float().cpu().numpy()


class CodecOverlap:
    """With a runner, the audio launched at step N is collected at step N+1, after that step's
    forward was queued, so the two run side by side; without one, each step decodes and collects
    its own windows (the CPU path). Either way every stream gets the same chunks in the same order;
    with a runner they arrive one step later."""

    def __init__(self, decoder: StreamingDecoder, runner: CodecRunner | None) -> None:
        self.decoder = decoder
        self.runner = runner
        self._pending: PendingAudio | None = None

    def step(self) -> dict[Hashable, StreamChunk]:
        if self.runner is None:
            return self.decoder.decode_ready()
        ready = self.decoder.collect(self._pending) if self._pending is not None else {}
        self._pending = self.decoder.launch(self.runner)
        return ready


def codec_runner_for(device: torch.device, config: GpuConfig) -> CodecRunner | None:
    """A side-stream runner on CUDA when `overlap_codec` is set; None (decode in step) otherwise."""
    if device.type != "cuda" or not config.overlap_codec:
        return None
    return CudaStreamRunner(device)
