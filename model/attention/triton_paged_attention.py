"""One Triton kernel for paged causal attention over a mixed batch of prefill chunks and decode tokens.

Work split (one program per (query tile, KV head)):

    tile of sequence i  =  up to BLOCK_Q consecutive new tokens of i  x  the GROUP query heads sharing one KV head
                           -> BLOCK_M = BLOCK_Q * GROUP rows of Q, loaded once

    grid[0] = num_tokens // BLOCK_Q + num_seqs   (an upper bound on the tiles: sequence i's tiles start at
              query_start_loc[i] // BLOCK_Q + i, found by a binary search, so no per-step host work is needed
              and a decode batch of fixed size always launches the same grid, as a CUDA graph requires)

Each program streams the keys/values of its sequence in TILE_N-token tiles through the block table, up to the
last position its tile's queries may see, with an online softmax in float32 (flash-attention style). A decode
token is simply a tile with one real query row per head of the group.
"""
from __future__ import annotations

import os

import torch
import triton
import triton.language as tl
from torch import Tensor


@triton.jit
def _find_sequence(query_start_loc_ptr, num_seqs, tile, BLOCK_Q: tl.constexpr):
    low = 0
    high = num_seqs
    while low < high:
        mid = (low + high) // 2
        first_tile = tl.load(query_start_loc_ptr + mid) // BLOCK_Q + mid
        if first_tile <= tile:
            low = mid + 1
        else:
            high = mid
    return low - 1


@triton.jit
def _dot(a, b, PRECISION: tl.constexpr, UPCAST: tl.constexpr):
    # NOTE: Triton's interpreter multiplies bfloat16 tiles as their raw 16-bit patterns; there (only) both
    # operands go up to float32, which is exact for bf16/fp16 products, so the result matches a tensor core's.
    if UPCAST:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision="ieee")
    return tl.dot(a, b, input_precision=PRECISION)


@triton.jit
def _paged_attention_kernel(
    out_ptr, query_ptr, cache_ptr, block_tables_ptr, seq_lens_ptr, query_start_loc_ptr,
    scale, num_seqs,
    stride_query_token, stride_query_head, stride_out_token, stride_out_head,
    stride_cache_kv, stride_cache_slot, stride_cache_head, stride_block_table,
    BLOCK_SIZE: tl.constexpr, GROUP: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_M: tl.constexpr,
    HEAD_DIM: tl.constexpr, DIM_P: tl.constexpr, TILE_N: tl.constexpr,
    PRECISION: tl.constexpr, UPCAST: tl.constexpr,
):
    tile = tl.program_id(0)
    kv_head = tl.program_id(1)
    seq = _find_sequence(query_start_loc_ptr, num_seqs, tile, BLOCK_Q)
    query_begin = tl.load(query_start_loc_ptr + seq)
    query_len = tl.load(query_start_loc_ptr + seq + 1) - query_begin
    first_query = (tile - (query_begin // BLOCK_Q + seq)) * BLOCK_Q
    if first_query >= query_len:
        return
    seq_len = tl.load(seq_lens_ptr + seq)
    context_len = seq_len - query_len

    rows = tl.arange(0, BLOCK_M)
    token_in_seq = first_query + rows // GROUP
    head = kv_head * GROUP + rows % GROUP
    row_ok = (rows < BLOCK_Q * GROUP) & (token_in_seq < query_len)
    dims = tl.arange(0, DIM_P)
    dim_ok = dims < HEAD_DIM
    token = (query_begin + token_in_seq).to(tl.int64)
    query = tl.load(
        query_ptr + token[:, None] * stride_query_token + head[:, None] * stride_query_head + dims[None, :],
        mask=row_ok[:, None] & dim_ok[None, :], other=0.0,
    )
    query_pos = context_len + token_in_seq

    # NOTE: finite initial max, so rows that see no key (padding) give exp(-inf - finite) = 0, never NaN.
    running_max = tl.full([BLOCK_M], -1.0e30, dtype=tl.float32)
    running_sum = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, DIM_P], dtype=tl.float32)
    last_query = tl.minimum(first_query + BLOCK_Q, query_len) - 1
    keys_visible = tl.minimum(context_len + last_query + 1, seq_len)
    block_table = block_tables_ptr + seq.to(tl.int64) * stride_block_table
    for start in range(0, keys_visible, TILE_N):
        key_pos = start + tl.arange(0, TILE_N)
        key_ok = key_pos < keys_visible
        block = tl.load(block_table + key_pos // BLOCK_SIZE, mask=key_ok, other=0).to(tl.int64)
        slot = block * BLOCK_SIZE + key_pos % BLOCK_SIZE
        kv_offsets = slot[:, None] * stride_cache_slot + kv_head * stride_cache_head + dims[None, :]
        kv_mask = key_ok[:, None] & dim_ok[None, :]
        key = tl.load(cache_ptr + kv_offsets, mask=kv_mask, other=0.0)
        value = tl.load(cache_ptr + stride_cache_kv + kv_offsets, mask=kv_mask, other=0.0)

        scores = _dot(query, tl.trans(key).to(query.dtype), PRECISION, UPCAST) * scale
        visible = (key_pos[None, :] <= query_pos[:, None]) & key_ok[None, :]
        scores = tl.where(visible, scores, float("-inf"))
        new_max = tl.maximum(running_max, tl.max(scores, axis=1))
        probs = tl.exp(scores - new_max[:, None])
        rescale = tl.exp(running_max - new_max)
        running_sum = running_sum * rescale + tl.sum(probs, axis=1)
        acc = acc * rescale[:, None] + _dot(probs.to(query.dtype), value.to(query.dtype), PRECISION, UPCAST)
        running_max = new_max

    out = acc / tl.where(running_sum > 0, running_sum, 1.0)[:, None]
    tl.store(
        out_ptr + token[:, None] * stride_out_token + head[:, None] * stride_out_head + dims[None, :],
        out.to(out_ptr.dtype.element_ty), mask=row_ok[:, None] & dim_ok[None, :],
    )


def _tile_shape(group: int) -> tuple[int, int]:
    """(BLOCK_M, BLOCK_Q): at least 16 rows (tl.dot's minimum), as many whole query tokens as fit."""
    block_m = max(16, triton.next_power_of_2(group))
    return block_m, block_m // group


def paged_attention(
    out: Tensor,
    query: Tensor,
    kv_cache: Tensor,
    block_tables: Tensor,
    seq_lens: Tensor,
    query_start_loc: Tensor,
    block_size: int,
    scale: float,
    tile_n: int | None = None,
) -> Tensor:
    """Writes into ``out`` [T, H, D] the causal attention of ``query`` [T, H, D] over the cached keys/values
    of each query's sequence (positions 0..its own); ``kv_cache`` already holds this step's keys/values.

    Sequence i owns query rows ``query_start_loc[i]:query_start_loc[i+1]`` and has ``seq_lens[i]`` tokens in
    the cache; a sequence with no rows or no cached tokens contributes nothing (padding).
    """
    num_tokens, num_heads, head_dim = query.shape
    num_kv_heads = kv_cache.shape[3]
    if num_heads % num_kv_heads or query.stride(-1) != 1 or out.stride(-1) != 1 or not kv_cache.is_contiguous():
        raise ValueError("paged_attention needs H divisible by KVH, unit-stride head dims and a contiguous cache")
    group = num_heads // num_kv_heads
    block_m, block_q = _tile_shape(group)
    num_seqs = seq_lens.shape[0]
    grid = (num_tokens // block_q + num_seqs, num_kv_heads)
    _paged_attention_kernel[grid](
        out, query, kv_cache, block_tables, seq_lens, query_start_loc,
        scale, num_seqs,
        query.stride(0), query.stride(1), out.stride(0), out.stride(1),
        kv_cache.stride(0), kv_cache.stride(2), kv_cache.stride(3), block_tables.stride(0),
        BLOCK_SIZE=block_size, GROUP=group, BLOCK_Q=block_q, BLOCK_M=block_m,
        HEAD_DIM=head_dim, DIM_P=triton.next_power_of_2(head_dim), TILE_N=tile_n or max(16, block_size),
        # float32 inputs get exact products (not TF32), so they match the float32 reference closely.
        PRECISION="ieee" if query.dtype == torch.float32 else "tf32",
        UPCAST=os.environ.get("TRITON_INTERPRET") == "1",
    )
    return out
