"""Decode steps replayed from CUDA graphs captured at padded batch sizes, over persistent input buffers."""
from __future__ import annotations

import bisect
import logging
import time
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from engine.gpu_config import GpuConfig
from model.attention.metadata import AttentionMetadata

if TYPE_CHECKING:
    from engine.model_runner import ModelRunner

logger = logging.getLogger("chorus.engine")


class DecodeGraphs:
    """One CUDA graph per padded batch size P of the backbone's forward over P one-token sequences.

    Invariant: a graph reads only the persistent buffers below and writes only the KV cache and
    ``self.hidden``; ``run`` fills them in place (no allocation) and marks rows past the real batch as padding
    (position 0, seq_len 0, slot -1), which writes no cache slot and reads no key. The sampler runs right after
    the replay, outside the graph, on the rows the caller selects from the returned view of ``self.hidden``
    (valid until the next ``run``).
    """

    def __init__(
        self,
        backbone: torch.nn.Module,
        kv_caches: list[Tensor],
        block_size: int,
        batch_sizes: list[int],
        max_model_len: int,
    ) -> None:
        self.backbone = backbone
        self.kv_caches = kv_caches
        self.block_size = block_size
        self.batch_sizes = sorted(batch_sizes)
        self.max_model_len = max_model_len
        device = kv_caches[0].device
        largest = self.batch_sizes[-1]
        weight = next(backbone.parameters())
        max_blocks = -(-max_model_len // block_size)
        self.embeds = torch.zeros(largest, backbone.config.hidden_size, dtype=weight.dtype, device=device)
        self.hidden = torch.zeros_like(self.embeds)
        self.positions = torch.zeros(largest, dtype=torch.int64, device=device)
        self.query_start_loc = torch.arange(largest + 1, dtype=torch.int32, device=device)
        self.seq_lens = torch.zeros(largest, dtype=torch.int32, device=device)
        self.block_tables = torch.zeros(largest, max_blocks, dtype=torch.int32, device=device)
        self.slot_mapping = torch.full((largest,), -1, dtype=torch.int64, device=device)
        self._graphs: dict[int, torch.cuda.CUDAGraph] = {}

    def capture(self) -> None:
        pool = None
        # NOTE: largest first, so the smaller graphs reuse the memory the largest one reserved in the pool.
        for size in reversed(self.batch_sizes):
            meta = self._metadata(size)
            # NOTE: one eager run first: it compiles the Triton kernels and grows the rotary table to
            # max_model_len, neither of which may happen while capturing.
            self._forward(size, meta)
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=pool):
                self._forward(size, meta)
            pool = graph.pool()
            self._graphs[size] = graph
        torch.cuda.synchronize()

    def can_run(self, meta: AttentionMetadata) -> bool:
        return (
            meta.max_query_len == 1
            and meta.num_seqs <= self.batch_sizes[-1]
            and meta.max_seq_len <= self.max_model_len
        )

    def run(self, embeds: Tensor, positions: Tensor, meta: AttentionMetadata) -> Tensor:
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
        self._graphs[padded].replay()
        return self.hidden[:batch]

    def _forward(self, size: int, meta: AttentionMetadata) -> None:
        hidden = self.backbone.forward(self.embeds[:size], self.positions[:size], self.kv_caches, meta)
        self.hidden[:size].copy_(hidden)

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


def attach_decode_graphs(
    runner: ModelRunner, config: GpuConfig, max_num_seqs: int, max_model_len: int
) -> bool:
    """Captures decode graphs for `runner` and makes it replay them; returns whether it did. Nothing happens
    off CUDA, with graphs disabled, or with an attention backend that cannot be captured."""
    if runner.device.type != "cuda" or not config.cuda_graphs:
        return False
    backbone = runner.family.backbone
    backend = backbone.layers[0].self_attn.attention
    if not backend.supports_cuda_graphs:
        logger.warning("CUDA graphs are off: attention backend %r cannot be captured (use 'triton')", backend.name)
        return False
    started = time.perf_counter()
    graphs = DecodeGraphs(
        backbone, runner.kv_caches, runner.block_size, config.graph_batch_sizes(max_num_seqs), max_model_len
    )
    with torch.inference_mode():
        graphs.capture()
    runner.decode_graphs = graphs
    logger.info("captured %d decode graphs (batch %s) in %.1f s", len(graphs.batch_sizes),
                graphs.batch_sizes, time.perf_counter() - started)
    return True
