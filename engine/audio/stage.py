"""The audio stage the engine core talks to: each request's frames in, its PCM chunks out."""
from __future__ import annotations

from typing import Hashable

import torch
from torch import Tensor

from engine.audio.chunking import Playback
from engine.audio.config import StreamingConfig
from engine.audio.decoder import PendingAudio, StreamChunk, StreamingDecoder
from engine.audio.runners import CodecRunner, runner_for
from engine.gpu_config import GpuConfig
from model.codecs.base import FrameCodec


class AudioStage:
    """With a runner, the audio launched at step N is collected at step N+1, after that step's
    forward was queued, so the two run side by side; without one, each step decodes and collects
    its own windows (the CPU path). Either way every stream gets the same chunks in the same order;
    with a runner they arrive one step later."""

    def __init__(self, decoder: StreamingDecoder, runner: CodecRunner | None) -> None:
        self.decoder = decoder
        self.runner = runner
        self._pending: PendingAudio | None = None

    @classmethod
    def build(cls, codec: FrameCodec, config: StreamingConfig, gpu: GpuConfig, device: torch.device,
              max_num_seqs: int) -> AudioStage:
        """The stage for `codec`, cutting windows as `config` (already resolved against the codec's
        window hints) says, on a side stream of `device` where `gpu` allows it, else in the step,
        incrementally where the codec can and `config` lets it."""
        runner = runner_for(codec, config, gpu, device, max_num_seqs)
        # NOTE: incremental decoding moves each stream's decoder state as it decodes; the side
        # stream's launch-now, collect-next-step overlap would need that state double-buffered.
        incremental = codec.incremental if runner is None and config.incremental else None
        return cls(StreamingDecoder(codec, config, incremental), runner)

    def open(self, stream_id: Hashable) -> None:
        self.decoder.open(stream_id)

    def push(self, stream_id: Hashable, frames: Tensor) -> None:
        self.decoder.push(stream_id, frames)

    def finish(self, stream_id: Hashable) -> None:
        self.decoder.finish(stream_id)

    def play_after(self, stream_id: Hashable, moment: float) -> None:
        """Its listener is busy with other audio until `moment` (StreamingDecoder.play_after)."""
        self.decoder.play_after(stream_id, moment)

    def discard(self, stream_id: Hashable) -> None:
        self.decoder.discard(stream_id)

    def playback(self, stream_id: Hashable) -> Playback | None:
        """Where the stream's listener stands (None once its audio is all out, or unknown)."""
        return self.decoder.playback(stream_id)

    def step(self) -> dict[Hashable, StreamChunk]:
        """The chunks ready now, at most one per stream."""
        if self.runner is None:
            return self.decoder.decode_ready()
        ready = self.decoder.collect(self._pending) if self._pending is not None else {}
        self._pending = self.decoder.launch(self.runner)
        return ready

    def take_failures(self) -> dict[Hashable, Exception]:
        """Streams whose audio failed to decode since the last call; they are already closed."""
        return self.decoder.take_failures()
