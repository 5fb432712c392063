"""Where the codec's batched window decodes run: on the caller's stream, or on a CUDA stream of
their own beside the next LM step (replaying window graphs where it can)."""
from __future__ import annotations

from typing import Any, Protocol

import numpy as np
import torch
from torch import Tensor

from capacity.config import CapacityConfig
from engine.audio.config import StreamingConfig
from engine.audio.graphs import WindowGraphs, capture_window_graphs
from engine.gpu_config import GpuConfig
from model.codecs.base import FrameCodec

MAX_CODEC_GRAPH_BATCH = 64


class CodecRunner(Protocol):
    """Runs the codec's batched decode and brings its audio to the host: `decode` returns a
    handle of the audio, `to_host` the samples [B, n]. A runner that decodes beside the caller
    returns before the audio exists; `to_host` waits for it (and raises the decode's error)."""

    def decode(self, codec: FrameCodec, batch: Tensor) -> Any: ...

    def to_host(self, audio: Any) -> np.ndarray: ...


class SyncRunner:
    """Decodes on the caller's stream; the audio exists when `decode` returns."""

    def decode(self, codec: FrameCodec, batch: Tensor) -> Tensor:
        return codec.decode(batch)

    def to_host(self, audio: Tensor) -> np.ndarray:
        return audio.float().cpu().numpy()


SYNC_RUNNER = SyncRunner()


class CudaStreamRunner:
    """Decodes on a stream of its own, ordered after the work already queued on the caller's stream
    (which wrote the frames) and before nothing queued later; `to_host` waits for that decode only.
    Batches of a shape `graphs` holds replay a captured graph (graphs.py)."""

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


def runner_for(codec: FrameCodec, config: StreamingConfig, gpu: GpuConfig, device: torch.device,
               max_num_seqs: int, capacity: CapacityConfig | None = None) -> CodecRunner | None:
    """A side-stream runner on CUDA when `overlap_codec` is set (with `codec_graphs`, replaying the
    steady window shapes `config` and `capacity`'s urgent slack cut at the padded batch sizes up to
    min(max_num_seqs, 64)); None (decode in step) otherwise. `capacity` None: the defaults; either
    way its thresholds left unset take the codec's values."""
    # NOTE: not on the CPU: a codec thread beside the forward was measured no faster (16 joe
    # streams in one core process: 41.7 ms steps against 39.7 inline). The 2-core machine's two
    # CPUs share one core's vector units: together a conv and a matmul loop ran only 1.3x faster
    # than one after the other.
    if device.type != "cuda" or not gpu.overlap_codec:
        return None
    graphs = None
    if gpu.codec_graphs:
        hints = codec.window_hints
        capacity = (capacity or CapacityConfig()).resolve(hints.urgent_slack_seconds, hints.defer_slack_seconds)
        graphs = capture_window_graphs(codec, config, capacity, codec_graph_batch_sizes(gpu, max_num_seqs), device)
    return CudaStreamRunner(device, graphs)


def codec_graph_batch_sizes(gpu: GpuConfig, max_num_seqs: int) -> list[int]:
    """The padded batch sizes the codec's graphs are captured at: the decode graphs' ladder up to 64.
    A stream sends a window every few steps, so a step's windows of one length are few; the larger
    (rare, start-aligned) batches decode eagerly instead of reserving graph memory."""
    return [size for size in gpu.graph_batch_sizes(max_num_seqs) if size <= MAX_CODEC_GRAPH_BATCH]
