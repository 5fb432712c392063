"""The codec's windows decoded on their own CUDA stream while the next LM step runs."""
from __future__ import annotations

from typing import Hashable

import numpy as np
import torch
from torch import Tensor

from engine.codec_graphs import WindowGraphs, capture_window_graphs
from engine.gpu_config import GpuConfig
from model.codecs.base import FrameCodec
from model.codecs.streaming import CodecRunner, PendingAudio, StreamChunk, StreamingDecoder

MAX_CODEC_GRAPH_BATCH = 64


class CudaStreamRunner:
    """Decodes on a stream of its own, ordered after the work already queued on the caller's stream
    (which wrote the frames) and before nothing queued later; `to_host` waits for that decode only.
    Batches of a shape `graphs` holds replay a captured graph (engine/codec_graphs.py)."""

    def __init__(self, device: torch.device, graphs: WindowGraphs | None = None) -> None:
        self.device = device
        self.stream = torch.cuda.Stream(device)
        self.graphs = graphs

    def decode(self, codec: FrameCodec, batch: Tensor) -> Tensor:
        # NOTE: frames may live on the host (Orpheus codes are python ints); they move on the
        # caller's stream, and `record_stream` exists for device memory only.
        batch = batch.to(self.device)
        self.stream.wait_stream(torch.cuda.current_stream(self.device))
        # NOTE: the batch was allocated on the caller's stream; without this its memory could be
        # reused there while the codec still reads it.
        batch.record_stream(self.stream)
        with torch.cuda.stream(self.stream):
            if self.graphs is not None and self.graphs.codec is codec and self.graphs.can_run(batch):
                return self.graphs.run(batch)
            # Frames were checked when pushed; the checks' host sync would stall the overlap.
            return codec.decode_trusted(batch)

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


def codec_runner_for(device: torch.device, config: GpuConfig, decoder: StreamingDecoder | None = None,
                     max_num_seqs: int = 1) -> CodecRunner | None:
    """A side-stream runner on CUDA when `overlap_codec` is set (with `codec_graphs`, replaying the
    steady window shapes of `decoder` at the padded batch sizes up to min(max_num_seqs, 64)); None
    (decode in step) otherwise."""
    if device.type != "cuda" or not config.overlap_codec:
        return None
    graphs = None
    if config.codec_graphs and decoder is not None:
        # A stream sends a window every few steps, so a step's windows of one length are few; the
        # larger (rare, start-aligned) batches decode eagerly instead of reserving graph memory.
        sizes = [size for size in config.graph_batch_sizes(max_num_seqs) if size <= MAX_CODEC_GRAPH_BATCH]
        graphs = capture_window_graphs(decoder.codec, decoder.config, sizes, device)
    return CudaStreamRunner(device, graphs)
