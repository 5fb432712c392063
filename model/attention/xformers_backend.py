"""Prefill through xformers' memory-efficient attention; decode through the Triton kernel (GPU only).

The Triton kernel serves prefill with small query tiles; xformers' kernels are built for long
query blocks. Which is faster for chunked prefill is measured on the GPU (benchmarks/gpu.sh,
"prefill" table), and the backend is chosen by config (`attention_backend="xformers"`).
"""
from __future__ import annotations

from typing import Callable

from torch import Tensor

from model.attention.metadata import AttentionMetadata
from model.attention.torch_ref import gather_sequences, sequence_block_ids
from model.attention.triton_backend import TritonBackend
from model.attention.triton_cache_write import write_kv

# (query [1, T, KVH, G, D], key/value [1, B * padding, KVH, G, D], query_lens, padding, seq_lens,
# scale) -> [1, T, KVH, G, D]: causal attention from the bottom right within each sequence, over
# the first seq_lens[i] keys of its padded row.
PaddedKeysAttention = Callable[[Tensor, Tensor, Tensor, list[int], int, list[int], float], Tensor]


def xformers_padded_keys_attention(query: Tensor, key: Tensor, value: Tensor, query_lens: list[int],
                                   padding: int, seq_lens: list[int], scale: float) -> Tensor:
    from xformers.ops import fmha  # NOTE: imported on use: xformers exists on CUDA machines only

    bias = fmha.attn_bias.BlockDiagonalCausalWithOffsetPaddedKeysMask.from_seqlens(
        q_seqlen=query_lens, kv_padding=padding, kv_seqlen=seq_lens, device=query.device
    )
    return fmha.memory_efficient_attention_forward(query, key, value, attn_bias=bias, scale=scale)


class XformersPrefillBackend(TritonBackend):
    """Same contract as the reference backend. Decode-only steps run the Triton kernel (so decode
    graphs capture them); a step with prefill tokens gathers each sequence's blocks into one
    padded key row per sequence and runs one xformers call with a block-diagonal, bottom-right
    causal, padded-keys mask (the same visibility as the reference: key k is visible to the query
    at position p of its sequence iff k <= p). GQA runs as xformers' grouped layout, the key/value
    heads expanded without a copy."""

    name = "xformers"

    def __init__(self, attention: PaddedKeysAttention = xformers_padded_keys_attention) -> None:
        self.attention = attention

    def forward(self, query: Tensor, key: Tensor, value: Tensor, kv_cache: Tensor, meta: AttentionMetadata,
                scale: float) -> Tensor:
        if meta.max_query_len == 1:
            return super().forward(query, key, value, kv_cache, meta, scale)
        write_kv(kv_cache, key, value, meta.slot_mapping)
        num_tokens, num_heads, head_dim = query.shape
        num_kv_heads = kv_cache.shape[3]
        group = num_heads // num_kv_heads
        rows = gather_sequences(kv_cache, sequence_block_ids(meta), meta.num_seqs, query.dtype)
        padding = rows.shape[2]
        rows = rows.view(2, 1, meta.num_seqs * padding, num_kv_heads, 1, head_dim)
        keys, values = (r.expand(-1, -1, -1, group, -1) for r in rows)
        grouped = query.view(1, num_tokens, num_kv_heads, group, head_dim)
        seq_lens = [c + q for c, q in zip(meta.context_lens, meta.query_lens)]
        out = self.attention(grouped, keys, values, meta.query_lens, padding, seq_lens, scale)
        return out.reshape(num_tokens, num_heads, head_dim)
