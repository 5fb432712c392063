"""The PyTorch reference attention backend: padded batched SDPA over keys gathered from the paged cache."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from model.attention.backend import AttentionBackend
from model.attention.metadata import AttentionMetadata


class TorchReferenceBackend(AttentionBackend):
    """Reference paged attention built from plain PyTorch ops, with no python loop over sequences.

    Each step pads the flat batch into ``[B, H, max_query_len, D]`` queries against ``[B, KVH, max_seq_len, D]``
    keys/values gathered block-wise from the cache, runs one scaled_dot_product_attention under a mask that
    admits key position k for the query at absolute position p iff k <= p, and unpads the result. Gathered
    slots at or past a sequence's length are zeroed so that stale or uninitialised cache memory (even NaN)
    can never leak into a real row.
    """

    name = "torch"

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        kv_cache: Tensor,
        meta: AttentionMetadata,
        scale: float,
    ) -> Tensor:
        num_tokens, num_heads, head_dim = query.shape
        num_seqs, max_query_len = meta.num_seqs, meta.max_query_len
        _write_new_kv(kv_cache, key, value, meta.slot_mapping)

        query_lens = meta.query_start_loc[1:] - meta.query_start_loc[:-1]
        token_seq = torch.repeat_interleave(
            torch.arange(num_seqs, device=query.device), query_lens, output_size=num_tokens
        )
        offsets_in_chunk = torch.arange(num_tokens, device=query.device) - meta.query_start_loc[token_seq]
        padded_rows = token_seq * max_query_len + offsets_in_chunk

        padded_query = query.new_zeros(num_seqs * max_query_len, num_heads, head_dim)
        padded_query.index_copy_(0, padded_rows, query)
        padded_query = padded_query.view(num_seqs, max_query_len, num_heads, head_dim).transpose(1, 2)

        keys, values = _gather_kv(kv_cache, meta, query.dtype)
        context_lens = meta.seq_lens.long() - query_lens.long()
        query_positions = context_lens[:, None] + torch.arange(max_query_len, device=query.device)
        key_positions = torch.arange(meta.max_seq_len, device=query.device)
        visible = key_positions[None, None, :] <= query_positions[:, :, None]

        out = F.scaled_dot_product_attention(
            padded_query, keys, values, attn_mask=visible[:, None], scale=scale,
            enable_gqa=num_heads != keys.shape[1],
        )
        out = out.transpose(1, 2).reshape(num_seqs * max_query_len, num_heads, head_dim)
        return out.index_select(0, padded_rows)


def _write_new_kv(kv_cache: Tensor, key: Tensor, value: Tensor, slot_mapping: Tensor) -> None:
    # NOTE: view (not reshape) so that a non-contiguous cache fails loudly instead of writing into a copy.
    flat_cache = kv_cache.view(2, -1, *kv_cache.shape[3:])
    new_kv = torch.stack((key, value)).to(kv_cache.dtype)
    _as_indexable(flat_cache).index_copy_(1, slot_mapping, _as_indexable(new_kv))


def _as_indexable(tensor: Tensor) -> Tensor:
    # NOTE: float8 has no CPU index kernels; a byte view moves the same bits.
    return tensor.view(torch.uint8) if tensor.dtype == torch.float8_e4m3fn else tensor


def _gather_kv(kv_cache: Tensor, meta: AttentionMetadata, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
    """Keys and values of every sequence, upcast from the cache's dtype to `dtype`."""
    blocks_needed = -(-meta.max_seq_len // meta.block_size)
    tables = meta.block_tables[:, :blocks_needed]
    gathered = _as_indexable(kv_cache).index_select(1, tables.flatten()).view(kv_cache.dtype).to(dtype)
    gathered = gathered.view(2, meta.num_seqs, blocks_needed * meta.block_size, *kv_cache.shape[3:])
    gathered = gathered[:, :, : meta.max_seq_len]
    key_positions = torch.arange(meta.max_seq_len, device=kv_cache.device)
    past_sequence_end = key_positions[None, :] >= meta.seq_lens[:, None]
    gathered.masked_fill_(past_sequence_end[None, :, :, None, None], 0)
    return gathered[0].transpose(1, 2), gathered[1].transpose(1, 2)
