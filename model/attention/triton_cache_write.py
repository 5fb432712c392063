"""Triton kernel that writes one step's new keys and values into the paged KV cache by slot mapping."""
from __future__ import annotations

import triton
import triton.language as tl
from torch import Tensor


@triton.jit
def _write_kv_kernel(
    key_ptr, value_ptr, cache_ptr, slot_mapping_ptr,
    stride_key_token, stride_key_head, stride_value_token, stride_value_head,
    stride_cache_kv, stride_cache_slot, stride_cache_head,
    NUM_KV_HEADS: tl.constexpr, HEAD_DIM: tl.constexpr,
    HEADS_P: tl.constexpr, DIM_P: tl.constexpr,
):
    token = tl.program_id(0)
    slot = tl.load(slot_mapping_ptr + token).to(tl.int64)
    # NOTE: a negative slot marks a padding row (a CUDA-graph batch padded to its captured size): it owns no slot.
    if slot < 0:
        return
    heads = tl.arange(0, HEADS_P)[:, None]
    dims = tl.arange(0, DIM_P)[None, :]
    mask = (heads < NUM_KV_HEADS) & (dims < HEAD_DIM)
    cache_row = cache_ptr + slot * stride_cache_slot + heads * stride_cache_head + dims
    key = tl.load(key_ptr + token * stride_key_token + heads * stride_key_head + dims, mask=mask)
    tl.store(cache_row, key.to(cache_ptr.dtype.element_ty), mask=mask)
    value = tl.load(value_ptr + token * stride_value_token + heads * stride_value_head + dims, mask=mask)
    tl.store(cache_row + stride_cache_kv, value.to(cache_ptr.dtype.element_ty), mask=mask)


def write_kv(kv_cache: Tensor, key: Tensor, value: Tensor, slot_mapping: Tensor) -> None:
    """Stores ``key[t]``/``value[t]`` ([T, KVH, D], last dim contiguous) at flat slot ``slot_mapping[t]`` of
    ``kv_cache`` ([2, num_blocks, block_size, KVH, D], contiguous); rows whose slot is negative are skipped."""
    num_tokens, num_kv_heads, head_dim = key.shape
    if key.stride(-1) != 1 or value.stride(-1) != 1 or not kv_cache.is_contiguous():
        raise ValueError("write_kv needs unit-stride head dims and a contiguous cache")
    if num_tokens == 0:
        return
    _write_kv_kernel[(num_tokens,)](
        key, value, kv_cache, slot_mapping,
        key.stride(0), key.stride(1), value.stride(0), value.stride(1),
        kv_cache.stride(0), kv_cache.stride(2), kv_cache.stride(3),
        NUM_KV_HEADS=num_kv_heads, HEAD_DIM=head_dim,
        HEADS_P=triton.next_power_of_2(num_kv_heads), DIM_P=triton.next_power_of_2(head_dim),
    )
