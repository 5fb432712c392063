"""The Triton attention backend: the paged KV cache written and read by Triton kernels (GPU, or the interpreter)."""
from __future__ import annotations

import torch
from torch import Tensor

from model.attention.backend import AttentionBackend
from model.attention.metadata import AttentionMetadata
from model.attention.triton_cache_write import write_kv
from model.attention.triton_paged_attention import paged_attention


class TritonBackend(AttentionBackend):
    """Same contract as the reference backend, in two launches per layer and no host synchronisation.

    It reads only the tensors of ``AttentionMetadata`` (never its python lists or maxima), so one decode step
    replays unchanged inside a CUDA graph whose input buffers are updated in place; a slot of -1 in
    ``slot_mapping`` marks a padding row that writes nothing.
    """

    name = "triton"
    supports_cuda_graphs = True

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        kv_cache: Tensor,
        meta: AttentionMetadata,
        scale: float,
    ) -> Tensor:
        write_kv(kv_cache, key, value, meta.slot_mapping)
        out = torch.empty_like(query)
        return paged_attention(
            out, query, kv_cache, meta.block_tables, meta.seq_lens, meta.query_start_loc, meta.block_size, scale
        )
