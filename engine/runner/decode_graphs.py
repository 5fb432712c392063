"""Decode steps replayed from CUDA graphs captured at padded batch sizes, over persistent input buffers."""
from __future__ import annotations

import bisect
import logging
import time
from typing import Sequence

import torch
from torch import Tensor

from engine.config import EngineConfig
from engine.graph_capture import capture_grid
from model.attention.metadata import AttentionMetadata
from model.backbone import Backbone
from model.families.base import GraphEmitter, SpeechFamily, StreamState

logger = logging.getLogger("chorus.engine")


class DecodeGraphs:
    """One CUDA graph per padded batch size P of a decode step over P one-token sequences: the
    backbone's forward and, with an `emitter` (the family's GraphEmitter), its head and sampling.

    Invariant: a graph reads only persistent buffers (the ones below and the emitter's) and writes
    only the KV cache, ``self.hidden`` and the emitter's outputs; ``run`` fills the inputs in place
    and marks rows past the real batch as padding (position 0, seq_len 0, slot -1), which writes no
    cache slot and reads no key. ``run`` returns a view of the emitter's outputs, or of
    ``self.hidden`` without an emitter (then the family's head and emit run eagerly after the
    replay); either view is valid until the next ``run``.

    With ``eager_replay`` nothing is captured and a "replay" runs the same function directly over
    the same buffers: the CPU tests' way through this path.
    """

    def __init__(
        self,
        backbone: Backbone,
        kv_caches: list[Tensor],
        block_size: int,
        batch_sizes: list[int],
        max_model_len: int,
        emitter: GraphEmitter | None = None,
        eager_replay: bool = False,
    ) -> None:
        self.backbone = backbone
        self.emitter = emitter
        self.eager_replay = eager_replay
        self.kv_caches = kv_caches
        self.block_size = block_size
        self.batch_sizes = sorted(batch_sizes)
        self.max_model_len = max_model_len
        device = kv_caches[0].device
        largest = self.batch_sizes[-1]
        max_blocks = -(-max_model_len // block_size)
        self.embeds = torch.zeros(largest, backbone.hidden_size, dtype=backbone.dtype, device=device)
        self.hidden = torch.zeros_like(self.embeds)
        self.positions = torch.zeros(largest, dtype=torch.int64, device=device)
        self.query_start_loc = torch.arange(largest + 1, dtype=torch.int32, device=device)
        self.seq_lens = torch.zeros(largest, dtype=torch.int32, device=device)
        self.block_tables = torch.zeros(largest, max_blocks, dtype=torch.int32, device=device)
        self.slot_mapping = torch.full((largest,), -1, dtype=torch.int64, device=device)
        self._graphs: dict[int, torch.cuda.CUDAGraph] = {}
        self._outputs: dict[int, Tensor] = {}

    def capture(self) -> None:
        if self.eager_replay:
            return
        # Views of the persistent buffers, one per size, made before any graph records.
        metadata = {size: self._metadata(size) for size in self.batch_sizes}
        # capture_graph's warm-up run compiles the Triton kernels and grows the rotary table to max_model_len.
        graphs, outputs = capture_grid([1], self.batch_sizes, lambda size, _: self._forward(size, metadata[size]))
        self._graphs = {size: graph for (size, _), graph in graphs.items()}
        self._outputs = {size: output for (size, _), output in outputs.items()}

    def can_run(self, meta: AttentionMetadata) -> bool:
        return (
            meta.max_query_len == 1
            and meta.num_seqs <= self.batch_sizes[-1]
            and meta.max_seq_len <= self.max_model_len
        )

    def run(self, embeds: Tensor, positions: Tensor, meta: AttentionMetadata,
            streams: Sequence[StreamState] = (), emits: Sequence[bool] = ()) -> Tensor:
        """`streams` and `emits` (one per sequence of `meta`) are what the emitter prepares from."""
        batch = meta.num_seqs
        padded = self.batch_sizes[bisect.bisect_left(self.batch_sizes, batch)]
        self.embeds[:batch].copy_(embeds)
        self.positions[:batch].copy_(positions)
        self.seq_lens[:batch].copy_(meta.seq_lens)
        self.slot_mapping[:batch].copy_(meta.slot_mapping)
        self.block_tables[:batch, : meta.block_tables.shape[1]].copy_(meta.block_tables)
        self.positions[batch:padded].zero_()
        self.seq_lens[batch:padded].zero_()
        self.slot_mapping[batch:padded].fill_(-1)
        if self.emitter is not None:
            self.emitter.prepare(streams, emits, padded)
        if self.eager_replay:
            outputs = self._forward(padded, self._metadata(padded))
        else:
            self._graphs[padded].replay()
            outputs = self._outputs[padded]
        return outputs[:batch]

    def _forward(self, size: int, meta: AttentionMetadata) -> Tensor:
        hidden = self.backbone.forward(self.embeds[:size], self.positions[:size], self.kv_caches, meta)
        self.hidden[:size].copy_(hidden)
        if self.emitter is None:
            return self.hidden[:size]
        return self.emitter.emit(self.hidden[:size])

    def _metadata(self, size: int) -> AttentionMetadata:
        return AttentionMetadata(
            query_start_loc=self.query_start_loc[: size + 1],
            seq_lens=self.seq_lens[:size],
            block_tables=self.block_tables[:size],
            slot_mapping=self.slot_mapping[:size],
            query_lens=[1] * size,
            context_lens=[0] * size,
            max_query_len=1,
            max_seq_len=self.max_model_len,
            block_size=self.block_size,
        )


def capture_decode_graphs(
    family: SpeechFamily, kv_caches: list[Tensor], config: EngineConfig, device: torch.device
) -> DecodeGraphs | None:
    """Decode graphs of `family`'s backbone over `kv_caches`, captured at the padded batch sizes up to the
    scheduler's `max_num_seqs`; None off CUDA, with graphs disabled, or with an attention backend that
    cannot be captured."""
    gpu = config.gpu
    if device.type != "cuda" or not gpu.cuda_graphs:
        return None
    backbone = family.backbone
    backend = backbone.attention_backend
    if not backend.supports_cuda_graphs:
        logger.warning("CUDA graphs are off: attention backend %r cannot be captured (use 'triton')", backend.name)
        return None
    started = time.perf_counter()
    batch_sizes = gpu.graph_batch_sizes(config.scheduler.max_num_seqs)
    emitter = family.graph_emitter(batch_sizes[-1]) if gpu.sample_in_graph else None
    graphs = DecodeGraphs(
        backbone, kv_caches, config.cache.block_size, batch_sizes, family.max_model_len, emitter
    )
    with torch.inference_mode():
        graphs.capture()
    logger.info("captured %d decode graphs (batch %s%s) in %.1f s", len(graphs.batch_sizes), graphs.batch_sizes,
                ", with sampling" if emitter is not None else "", time.perf_counter() - started)
    return graphs
