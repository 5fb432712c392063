"""The fp8 (e4m3, scale 1.0) KV cache: written by both backends with the same bits, read back upcast.

Against a float32 reference whose keys and values went through the same fp8 rounding the outputs
agree to float32 precision; against the unrounded float32 reference they differ by the rounding
itself (3 mantissa bits: up to 1/16 relative per element), which on unit-normal inputs stays below
FP8_TOLERANCE.

Triton's interpreter rounds float32 to fp8 wrongly when the mantissa carries into the exponent
(1.97 becomes 1.0, not 2.0; the GPU's conversion instruction does not), so on the CPU the Triton
kernels get keys and values that fp8 holds exactly: that checks their fp8 addressing, store and
upcast, while the rounding of arbitrary values is checked on the GPU (and in the torch backend)."""
from __future__ import annotations

import pytest
import torch

from memory.config import CacheConfig
from memory.kv_tensors import KVLayout, kv_cache_dtype
from model.attention import get_attention_backend
from tests.model.long.test_triton_attention import DEVICE, MIXED, Batch

FP8 = torch.float8_e4m3fn
FP8_TOLERANCE = 0.15


def run(batch: Batch, backend: str, cache_dtype: torch.dtype, round_kv: bool = False, device: str = "cpu"):
    """Float32 activations over a cache of `cache_dtype`; `round_kv` passes K/V (history and new)
    through fp8 first, giving the float32 reference of what an fp8 cache holds."""
    cache, key, value = batch.cache, batch.key, batch.value
    if round_kv:
        cache, key, value = (t.to(FP8).float() for t in (cache, key, value))
    cache, key, value, query = (t.to(device) for t in (cache.to(cache_dtype), key, value, batch.query))
    out = get_attention_backend(backend).forward(query, key, value, cache, batch.metadata(device), batch.scale)
    return out.float().cpu(), cache.cpu()


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_fp8_cache_matches_fp8_rounded_float32_reference(backend):
    batch = Batch(MIXED, num_kv_heads=2, group=2, head_dim=32, block_size=16, dtype=torch.float32, seed=3)
    interpreted = backend == "triton" and DEVICE == "cpu"
    device = "cpu" if backend == "torch" else DEVICE
    out, cache = run(batch, backend, FP8, round_kv=interpreted, device=device)
    rounded, rounded_cache = run(batch, "torch", torch.float32, round_kv=True)
    assert cache.dtype == FP8
    assert torch.equal(cache.float().nan_to_num(7.0), rounded_cache.nan_to_num(7.0)), "cache bits differ"
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out, rounded, atol=1e-4, rtol=0)
    exact, _ = run(batch, "torch", torch.float32)
    error = (out - exact).abs()
    assert 0 < error.max() < FP8_TOLERANCE and error.mean() < FP8_TOLERANCE / 10


def test_fp8_write_saturates_instead_of_overflowing():
    batch = Batch([(0, 3)], num_kv_heads=1, group=1, head_dim=16, block_size=4, dtype=torch.float32)
    batch.key = batch.key * 1000
    _, cache = run(batch, "torch", FP8)
    written = cache[0, batch.tables[0][0], :3].float()
    assert written.abs().max() == 448 and torch.isfinite(written).all()


def test_cache_config_picks_the_storage_dtype_and_halves_the_block_bytes():
    assert kv_cache_dtype(CacheConfig(), torch.bfloat16) == torch.bfloat16
    assert kv_cache_dtype(CacheConfig(kv_cache_dtype="fp8_e4m3"), torch.bfloat16) == FP8
    with pytest.raises(ValueError, match="kv_cache_dtype"):
        CacheConfig(kv_cache_dtype="fp8")
    bf16, fp8 = (KVLayout(2, 4, 64, 16, dtype) for dtype in (torch.bfloat16, FP8))
    assert bf16.bytes_per_block == 2 * fp8.bytes_per_block == 2 * 2 * 2 * 16 * 4 * 64
    assert all(t.dtype == FP8 for t in fp8.allocate(3, "cpu"))
