"""The codec's batched window decodes replayed from CUDA graphs captured at fixed shapes.

A streaming decoder cuts every stream into windows of a few lengths (chunking.py): the
first chunk, then steady chunks, each with the same context frames. Windows of one length are
decoded as one batch. At start-up a graph is captured for each of those lengths at every padded
batch size of the decode graphs' ladder; a batch of another shape decodes eagerly.
"""
from __future__ import annotations

import bisect

import torch
from torch import Tensor

from capacity.config import CapacityConfig
from engine.audio.chunking import ChunkPolicy
from engine.audio.config import StreamingConfig
from engine.graph_capture import capture_grid, captured
from model.codecs.base import FrameCodec


def steady_window_lengths(config: StreamingConfig, capacity: CapacityConfig) -> list[int]:
    """Window lengths (frames, context included) a stream produces away from its end: the first
    chunk's (no frames before it), and each later chunk size's with full context (`capacity`'s
    urgent slack adds first-chunk-sized ones). A stream's last window and a lagging codec's
    multi-chunk windows have other lengths: those run eagerly. Both configs resolved."""
    ahead, left = config.lookahead_frames, config.left_context_frames
    later = ChunkPolicy(config, capacity).later_chunk_sizes()
    return sorted({config.first_chunk_frames + config.first_lookahead_frames, *(left + size + ahead for size in later)})


class WindowGraphs:
    """Decodes of [B, n, *frame_shape] frame batches, for n in `lengths` and B up to the largest
    of `batch_sizes`, replayed from one graph per (padded size, n).

    Invariant: a graph reads only its input buffer; `run` copies the batch into the input (rows
    past B repeat row 0, valid frames whose audio is dropped) and returns its own copy of the
    output [B, n * samples_per_frame]. A copy, not a view: the graphs share one memory pool, so
    a graph captured later may keep its output where an earlier one keeps its scratch, and a
    launch replays several lengths before the streaming decoder collects any. With
    `eager_replay` nothing is captured and a "replay" runs the same function over the same
    buffers: the CPU tests' way through this path.
    """

    def __init__(self, codec: FrameCodec, batch_sizes: list[int], lengths: list[int],
                 device: torch.device, eager_replay: bool = False) -> None:
        self.codec = codec
        self.batch_sizes = sorted(batch_sizes)
        self.lengths = sorted(lengths)
        self.eager_replay = eager_replay
        largest = self.batch_sizes[-1]
        self._inputs = {
            n: torch.zeros(largest, n, *codec.frame_shape, dtype=codec.frame_dtype, device=device)
            for n in self.lengths
        }
        self._outputs: dict[tuple[int, int], Tensor] = {}
        self._graphs: dict[tuple[int, int], torch.cuda.CUDAGraph] = {}

    def capture(self) -> None:
        if self.eager_replay:
            return
        self._graphs, self._outputs = capture_grid(
            self.lengths, self.batch_sizes, lambda size, n: self.codec.decode_trusted(self._inputs[n][:size]))

    def can_run(self, batch: Tensor) -> bool:
        return batch.shape[0] <= self.batch_sizes[-1] and batch.shape[1] in self._inputs

    def run(self, batch: Tensor) -> Tensor:
        rows, n = batch.shape[:2]
        padded = self.batch_sizes[bisect.bisect_left(self.batch_sizes, rows)]
        inputs = self._inputs[n]
        inputs[:rows].copy_(batch)
        inputs[rows:padded].copy_(batch[:1].expand(padded - rows, *batch.shape[1:]))
        if self.eager_replay:
            return self.codec.decode_trusted(inputs[:padded])[:rows]
        self._graphs[padded, n].replay()
        return self._outputs[padded, n][:rows].clone()  # on the replay's stream, before another replay


def capture_window_graphs(codec: FrameCodec, config: StreamingConfig, capacity: CapacityConfig,
                          batch_sizes: list[int], device: torch.device) -> WindowGraphs:
    return captured(WindowGraphs(codec, batch_sizes, steady_window_lengths(config, capacity), device),
                    "codec window graphs")
