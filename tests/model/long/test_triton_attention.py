"""The Triton attention kernels against the PyTorch reference backend, under Triton's interpreter on the CPU
(about half a second a case there, so in the slow tier; on a GPU they take milliseconds)."""
from __future__ import annotations

import os
import random

import pytest
import torch

if not torch.cuda.is_available():
    # NOTE: must be set before anything imports triton (transformers does): tests/conftest.py should set it
    # for the whole session; this covers running this file alone.
    os.environ.setdefault("TRITON_INTERPRET", "1")
pytest.importorskip("triton")

from model.attention import AttentionMetadata, get_attention_backend  # noqa: E402
from model.attention.triton_cache_write import write_kv  # noqa: E402
from model.attention.triton_paged_attention import paged_attention  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
# Worst-case elementwise error against a float32 reference on unit-normal inputs; half precision rounds the
# softmax weights to its own dtype before they meet V, as flash attention does on tensor cores.
TOLERANCE = {torch.float32: 1e-4, torch.float16: 4e-3, torch.bfloat16: 3e-2}


class Batch:
    """A mixed batch: sequences (context_len, query_len) own shuffled, scattered blocks of a cache in which
    every slot that no sequence owns holds a large finite value (stale memory: the engine's pool starts
    zeroed and holds only real K/V), so a read outside a sequence shows up in its output."""

    def __init__(self, shapes, num_kv_heads, group, head_dim, block_size, dtype, seed=0, spare_blocks=4):
        gen = torch.Generator().manual_seed(seed)
        rng = random.Random(seed)
        self.shapes, self.block_size, self.dtype = shapes, block_size, dtype
        blocks_needed = [-(-(ctx + q) // block_size) for ctx, q in shapes]
        num_blocks = sum(blocks_needed) + spare_blocks
        free = list(range(num_blocks))
        rng.shuffle(free)
        self.tables = [[free.pop() for _ in range(n)] for n in blocks_needed]
        self.cache = torch.full((2, num_blocks, block_size, num_kv_heads, head_dim), 50.0, dtype=dtype)
        flat = self.cache.view(2, -1, num_kv_heads, head_dim)
        new_kv = []
        for (ctx, q), table in zip(shapes, self.tables):
            history = torch.randn(2, ctx + q, num_kv_heads, head_dim, generator=gen).to(dtype)
            for p in range(ctx):
                flat[:, table[p // block_size] * block_size + p % block_size] = history[:, p]
            new_kv.append(history[:, ctx:])
        self.key, self.value = torch.cat(new_kv, dim=1)
        total = sum(q for _, q in shapes)
        self.query = torch.randn(total, num_kv_heads * group, head_dim, generator=gen).to(dtype)
        self.scale = head_dim ** -0.5

    def metadata(self, device=DEVICE):
        return AttentionMetadata.build([q for _, q in self.shapes], [c for c, _ in self.shapes], self.tables,
                                       self.block_size, device=device)

    def run(self, backend_name, dtype=None, device=DEVICE):
        dtype = dtype or self.dtype
        cache = self.cache.to(device=device, dtype=dtype)
        args = [t.to(device=device, dtype=dtype) for t in (self.query, self.key, self.value)]
        out = get_attention_backend(backend_name).forward(*args, cache, self.metadata(device), self.scale)
        return out.float().cpu(), cache.cpu()


def check_against_reference(batch: Batch) -> None:
    out, cache = batch.run("triton")
    expected, expected_cache = batch.run("torch", dtype=torch.float32, device="cpu")
    assert torch.equal(cache.float().nan_to_num(7.0), expected_cache.nan_to_num(7.0)), "cache write differs"
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out, expected, atol=TOLERANCE[batch.dtype], rtol=0)
    # Rounding scatters around the reference; a systematic error (a wrong key, a lost row) would not.
    assert (out - expected).abs().mean() < TOLERANCE[batch.dtype] / 8


MIXED = [(0, 13), (37, 1), (16, 1), (5, 20), (0, 1), (63, 1)]  # prefills, chunked prefills, decodes


@pytest.mark.parametrize("group", [1, 2, 3, 4])
def test_mixed_prefill_and_decode_across_gqa_ratios(group):
    check_against_reference(Batch(MIXED, num_kv_heads=2, group=group, head_dim=64, block_size=16,
                                  dtype=torch.float32, seed=group))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_inputs_accumulate_in_float32(dtype):
    check_against_reference(Batch(MIXED, num_kv_heads=2, group=2, head_dim=64, block_size=16, dtype=dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_head_dim_128_orpheus_group(dtype):
    shapes = [(40, 1), (0, 9), (17, 1), (3, 4)]
    check_against_reference(Batch(shapes, num_kv_heads=2, group=3, head_dim=128, block_size=16, dtype=dtype))


@pytest.mark.parametrize("block_size", [8, 16, 32])
def test_sequences_ending_mid_block_at_any_block_size(block_size):
    shapes = [(block_size - 3, 1), (2 * block_size + 1, 2), (block_size, 5), (0, block_size + 1)]
    check_against_reference(Batch(shapes, num_kv_heads=1, group=4, head_dim=64, block_size=block_size,
                                  dtype=torch.float32, seed=block_size))


def test_decode_only_batch():
    shapes = [(ctx, 1) for ctx in (0, 1, 15, 16, 17, 31, 45, 2)]
    check_against_reference(Batch(shapes, num_kv_heads=2, group=2, head_dim=64, block_size=16,
                                  dtype=torch.float32))


def test_key_tiles_wider_than_a_block_span_several_blocks():
    batch = Batch(MIXED, num_kv_heads=2, group=2, head_dim=64, block_size=8, dtype=torch.float32, seed=3)
    cache = batch.cache.clone().to(DEVICE)
    meta = batch.metadata()
    write_kv(cache, batch.key.to(DEVICE), batch.value.to(DEVICE), meta.slot_mapping)
    query = batch.query.to(DEVICE)
    out = paged_attention(torch.empty_like(query), query, cache, meta.block_tables, meta.seq_lens,
                          meta.query_start_loc, batch.block_size, batch.scale, tile_n=32)
    expected, _ = batch.run("torch", device="cpu")
    torch.testing.assert_close(out.cpu(), expected, atol=1e-4, rtol=0)


def test_cache_write_is_exact_for_strided_inputs_and_skips_padding_slots():
    gen = torch.Generator().manual_seed(5)
    num_tokens, num_kv_heads, head_dim = 6, 3, 64
    qkv = torch.randn(num_tokens, (4 + 2 * num_kv_heads) * head_dim, generator=gen).to(torch.bfloat16)
    _, key, value = qkv.split([4 * head_dim, num_kv_heads * head_dim, num_kv_heads * head_dim], dim=-1)
    key, value = (t.view(num_tokens, num_kv_heads, head_dim) for t in (key, value))  # strided views
    cache = torch.zeros(2, 5, 4, num_kv_heads, head_dim, dtype=torch.bfloat16)
    slots = torch.tensor([0, 19, -1, 7, 8, -1])
    write_kv(cache, key, value, slots)
    expected = torch.zeros_like(cache)
    flat = expected.view(2, -1, num_kv_heads, head_dim)
    for t, slot in enumerate(slots.tolist()):
        if slot >= 0:
            flat[0, slot], flat[1, slot] = key[t], value[t]
    assert torch.equal(cache, expected)


def test_padding_sequences_with_no_cached_tokens_output_zeros_and_leave_others_alone():
    """The layout a CUDA-graph decode batch is padded with: one query row each, seq_len 0, slot -1."""
    batch = Batch([(20, 1), (3, 1)], num_kv_heads=2, group=2, head_dim=64, block_size=16, dtype=torch.float32)
    expected, _ = batch.run("torch", device="cpu")
    meta = batch.metadata(device="cpu")
    pad = 3
    cache = batch.cache.clone()
    query = torch.cat([batch.query, torch.randn(pad, *batch.query.shape[1:])])
    key, value = (torch.cat([t, torch.randn(pad, *t.shape[1:])]) for t in (batch.key, batch.value))
    slots = torch.cat([meta.slot_mapping, torch.full((pad,), -1)])
    tables = torch.cat([meta.block_tables, torch.zeros(pad, meta.block_tables.shape[1], dtype=torch.int32)])
    seq_lens = torch.cat([meta.seq_lens, torch.zeros(pad, dtype=torch.int32)])
    starts = torch.arange(2 + pad + 1, dtype=torch.int32)
    before = cache.clone()
    write_kv(cache, key, value, slots)
    changed = (cache.nan_to_num(7.0) != before.nan_to_num(7.0)).any(dim=(0, 2, 3, 4)).nonzero().flatten()
    assert set(changed.tolist()) <= {b for table in batch.tables for b in table}
    out = paged_attention(torch.empty_like(query), query, cache, tables, seq_lens, starts, 16, batch.scale)
    torch.testing.assert_close(out[:2], expected, atol=1e-4, rtol=0)
    assert torch.equal(out[2:], torch.zeros_like(out[2:]))
