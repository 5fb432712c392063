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

    A step's sequences attend in at most two groups, the decoding ones (one query each) and the
    prefilling ones. Each group pads its tokens into ``[B, H, max_query_len, D]`` queries against
    ``[B, KVH, max_seq_len, D]`` keys/values gathered block-wise from the cache, runs one
    scaled_dot_product_attention under a mask that admits key position k for the query at absolute
    position p iff k <= p, and unpads the result. (One padded batch for both would give every
    decoding stream a prefill chunk's worth of padded queries: with 16 streams decoding, a
    130-token prefill cost 17 times its own attention.)

    Slots past a sequence's end are gathered but masked, so they contribute exactly zero as long as they hold
    finite values: the KV pool is zero-initialised (memory/kv_tensors.py) and only real keys and values are
    ever written. The step's index and mask plans are built by the first layer and reused by the others.
    """

    name = "torch"

    def __init__(self) -> None:
        self._plan_meta: AttentionMetadata | None = None
        self._plan: list[_GroupPlan] = []

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        kv_cache: Tensor,
        meta: AttentionMetadata,
        scale: float,
    ) -> Tensor:
        _write_new_kv(kv_cache, key, value, meta.slot_mapping)
        groups = self._plan_for(meta, query.device)
        if len(groups) == 1:
            return groups[0].attend(query, kv_cache, scale)
        out = torch.empty_like(query)
        for group in groups:
            out.index_copy_(0, group.rows, group.attend(query.index_select(0, group.rows), kv_cache, scale))
        return out

    def _plan_for(self, meta: AttentionMetadata, device: torch.device) -> list["_GroupPlan"]:
        # NOTE: keyed on the metadata object itself (kept alive here), so a new step never reuses
        # an old plan even if Python hands the new object the old one's id.
        if self._plan_meta is not meta:
            self._plan, self._plan_meta = _GroupPlan.split(meta, device), meta
        return self._plan


@dataclass(slots=True)
class _GroupPlan:
    """Everything about one group's attention that depends only on the step's metadata, not on
    the layer. Invariant: `meta` is the group's own batch (AttentionMetadata.subset), whose tokens
    are the step's rows `rows` (None: the group is the whole step)."""

    meta: AttentionMetadata
    rows: Tensor | None
    padded_rows: Tensor | None  # [T]: each token's row in the padded [B * max_query_len] layout (None: decode)
    # [B, 1, max_query_len, max_seq_len] bool: key k is visible to the query at p iff k <= p;
    # None when every key gathered is visible (decode steps of equally long sequences).
    visible: Tensor | None
    block_ids: Tensor  # [B * blocks_needed]: the blocks to gather, row-major by sequence

    @classmethod
    def split(cls, meta: AttentionMetadata, device: torch.device) -> list["_GroupPlan"]:
        """The step's groups: decoding sequences, prefilling ones (either may be absent)."""
        decoding = [i for i, q in enumerate(meta.query_lens) if q == 1]
        if len(decoding) in (0, meta.num_seqs):
            return [cls.build(meta, None, device)]
        prefilling = [i for i, q in enumerate(meta.query_lens) if q > 1]
        groups = []
        for seqs in (decoding, prefilling):
            rows = torch.tensor(meta.token_rows(seqs), dtype=torch.int64, device=device)
            groups.append(cls.build(meta.subset(seqs, rows), rows, device))
        return groups

    @classmethod
    def build(cls, meta: AttentionMetadata, rows: Tensor | None, device: torch.device) -> "_GroupPlan":
        block_ids = sequence_block_ids(meta)
        if meta.max_query_len == 1:
            # Decode only: no padding, and each query sees its sequence's first seq_len keys
            # (no mask at all when every sequence has max_seq_len). Fewer small ops per step.
            if min(meta.context_lens) == max(meta.context_lens):
                return cls(meta, rows, None, None, block_ids)
            key_positions = torch.arange(meta.max_seq_len, device=device)
            return cls(meta, rows, None, (key_positions < meta.seq_lens[:, None])[:, None, None, :], block_ids)
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
        return cls(meta, rows, padded_rows, visible[:, None], block_ids)

    def attend(self, query: Tensor, kv_cache: Tensor, scale: float) -> Tensor:
        """The attention output of this group's `query` rows [T, H, D] (new keys already cached)."""
        num_tokens, num_heads, head_dim = query.shape
        num_seqs, max_query_len = self.meta.num_seqs, self.meta.max_query_len
        decode_only = self.padded_rows is None  # one query per sequence: the flat batch is already padded
        if decode_only:
            padded_query = query.view(num_seqs, 1, num_heads, head_dim).transpose(1, 2)
        else:
            padded_query = query.new_zeros(num_seqs * max_query_len, num_heads, head_dim)
            padded_query.index_copy_(0, self.padded_rows, query)
            padded_query = padded_query.view(num_seqs, max_query_len, num_heads, head_dim).transpose(1, 2)
        keys, values = _gather_kv(kv_cache, self.meta, self.block_ids, query.dtype)
        out = F.scaled_dot_product_attention(
            padded_query, keys, values, attn_mask=self.visible, scale=scale,
            enable_gqa=num_heads != keys.shape[1],
        )
        out = out.transpose(1, 2).reshape(num_seqs * max_query_len, num_heads, head_dim)
        return out if decode_only else out.index_select(0, self.padded_rows)


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
