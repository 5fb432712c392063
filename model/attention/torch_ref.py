"""The PyTorch reference attention backend: padded batched SDPA over keys gathered from the paged cache."""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from model.attention.backend import AttentionBackend
from model.attention.metadata import AttentionMetadata


class TorchReferenceBackend(AttentionBackend):
    """Reference paged attention built from plain PyTorch ops, with no python loop over sequences.

    Each step pads the flat batch into ``[B, H, max_query_len, D]`` queries against ``[B, KVH, max_seq_len, D]``
    keys/values gathered block-wise from the cache, runs one scaled_dot_product_attention under a mask that
    admits key position k for the query at absolute position p iff k <= p, and unpads the result.

    Slots past a sequence's end are gathered but masked, so they contribute exactly zero as long as they hold
    finite values: the KV pool is zero-initialised (memory/kv_tensors.py) and only real keys and values are
    ever written. The step's index and mask plan is built by the first layer and reused by the others.
    """

    name = "torch"

    def __init__(self) -> None:
        self._plan_meta: AttentionMetadata | None = None
        self._plan: _StepPlan | None = None

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

        plan = self._plan_for(meta, query.device)
        decode_only = max_query_len == 1  # one query per sequence: the flat batch is already padded
        if decode_only:
            padded_query = query.view(num_seqs, 1, num_heads, head_dim).transpose(1, 2)
        else:
            padded_query = query.new_zeros(num_seqs * max_query_len, num_heads, head_dim)
            padded_query.index_copy_(0, plan.padded_rows, query)
            padded_query = padded_query.view(num_seqs, max_query_len, num_heads, head_dim).transpose(1, 2)
        keys, values = _gather_kv(kv_cache, meta, plan.block_ids, query.dtype)
        out = F.scaled_dot_product_attention(
            padded_query, keys, values, attn_mask=plan.visible, scale=scale,
            enable_gqa=num_heads != keys.shape[1],
        )
        out = out.transpose(1, 2).reshape(num_seqs * max_query_len, num_heads, head_dim)
        return out if decode_only else out.index_select(0, plan.padded_rows)

    def _plan_for(self, meta: AttentionMetadata, device: torch.device) -> "_StepPlan":
        # NOTE: keyed on the metadata object itself (kept alive here), so a new step never reuses
        # an old plan even if Python hands the new object the old one's id.
        if self._plan_meta is not meta:
            self._plan, self._plan_meta = _StepPlan.build(meta, device), meta
        return self._plan


@dataclass(slots=True)
class _StepPlan:
    """Everything about a step's attention that depends only on its metadata, not on the layer."""

    padded_rows: Tensor | None  # [T]: each token's row in the padded [B * max_query_len] layout (None: decode)
    # [B, 1, max_query_len, max_seq_len] bool: key k is visible to the query at p iff k <= p;
    # None when every key gathered is visible (decode steps of equally long sequences).
    visible: Tensor | None
    block_ids: Tensor  # [B * blocks_needed]: the blocks to gather, row-major by sequence

    @classmethod
    def build(cls, meta: AttentionMetadata, device: torch.device) -> "_StepPlan":
        block_ids = sequence_block_ids(meta)
        if meta.max_query_len == 1:
            # Decode only: no padding, and each query sees its sequence's first seq_len keys
            # (no mask at all when every sequence has max_seq_len). Fewer small ops per step.
            if min(meta.context_lens) == max(meta.context_lens):
                return cls(None, None, block_ids)
            key_positions = torch.arange(meta.max_seq_len, device=device)
            return cls(None, (key_positions < meta.seq_lens[:, None])[:, None, None, :], block_ids)
        num_tokens = int(meta.num_tokens)
        query_lens = meta.query_start_loc[1:] - meta.query_start_loc[:-1]
        token_seq = torch.repeat_interleave(
            torch.arange(meta.num_seqs, device=device), query_lens, output_size=num_tokens
        )
        offsets_in_chunk = torch.arange(num_tokens, device=device) - meta.query_start_loc[token_seq]
        padded_rows = token_seq * meta.max_query_len + offsets_in_chunk
        context_lens = meta.seq_lens.long() - query_lens.long()
        query_positions = context_lens[:, None] + torch.arange(meta.max_query_len, device=device)
        key_positions = torch.arange(meta.max_seq_len, device=device)
        visible = key_positions[None, None, :] <= query_positions[:, :, None]
        return cls(padded_rows, visible[:, None], block_ids)


def _write_new_kv(kv_cache: Tensor, key: Tensor, value: Tensor, slot_mapping: Tensor) -> None:
    # NOTE: view (not reshape) so that a non-contiguous cache fails loudly instead of writing into a copy.
    flat_cache = kv_cache.view(2, -1, *kv_cache.shape[3:])
    new_kv = torch.stack((key, value)).to(kv_cache.dtype)
    _as_indexable(flat_cache).index_copy_(1, slot_mapping, _as_indexable(new_kv))


def _as_indexable(tensor: Tensor) -> Tensor:
    # NOTE: float8 has no CPU index kernels; a byte view moves the same bits.
    return tensor.view(torch.uint8) if tensor.dtype == torch.float8_e4m3fn else tensor


def sequence_block_ids(meta: AttentionMetadata) -> Tensor:
    """[B * blocks]: each sequence's first ceil(max_seq_len / block_size) blocks, row-major by sequence."""
    return meta.block_tables[:, : -(-meta.max_seq_len // meta.block_size)].flatten()


def gather_sequences(kv_cache: Tensor, block_ids: Tensor, num_seqs: int, dtype: torch.dtype) -> Tensor:
    """Keys and values of `block_ids` (from `sequence_block_ids`) as one padded row per sequence,
    [2, B, blocks * block_size, KVH, D], upcast from the cache's dtype."""
    gathered = _as_indexable(kv_cache).index_select(1, block_ids).view(kv_cache.dtype).to(dtype)
    return gathered.view(2, num_seqs, -1, *kv_cache.shape[3:])


def _gather_kv(
    kv_cache: Tensor, meta: AttentionMetadata, block_ids: Tensor, dtype: torch.dtype
) -> tuple[Tensor, Tensor]:
    """Keys and values [B, KVH, max_seq_len, D] of every sequence, upcast from the cache's dtype."""
    gathered = gather_sequences(kv_cache, block_ids, meta.num_seqs, dtype)[:, :, : meta.max_seq_len]
    return gathered[0].transpose(1, 2), gathered[1].transpose(1, 2)
