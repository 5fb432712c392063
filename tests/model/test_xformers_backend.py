"""The xformers prefill backend's paging, padding and GQA layout against the reference backend.

On the CPU the xformers call itself is replaced by `padded_keys_attention` below, which computes
what xformers documents for BlockDiagonalCausalWithOffsetPaddedKeysMask (each sequence's queries
see its first seq_len keys, causal from the bottom right); decode steps and cache writes run the
Triton kernels under the interpreter. With CUDA and xformers installed, the real call runs too.
"""
from __future__ import annotations

import importlib.util
import os
import random

import pytest
import torch
import torch.nn.functional as F

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
pytest.importorskip("triton")

from model.attention import AttentionMetadata, get_attention_backend  # noqa: E402
from model.attention.xformers_backend import XformersPrefillBackend  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def padded_keys_attention(query, key, value, query_lens, padding, seq_lens, scale):
    outputs, start = [], 0
    for i, (q_len, seq_len) in enumerate(zip(query_lens, seq_lens)):
        q = query[0, start:start + q_len]                       # [q, KVH, G, D]
        k = key[0, i * padding:i * padding + seq_len]           # [s, KVH, G, D]
        v = value[0, i * padding:i * padding + seq_len]
        visible = torch.arange(seq_len)[None, :] <= (seq_len - q_len + torch.arange(q_len))[:, None]
        # [KVH, G, q, D] against [KVH, G, s, D]
        out = F.scaled_dot_product_attention(q.permute(1, 2, 0, 3), k.permute(1, 2, 0, 3), v.permute(1, 2, 0, 3),
                                             attn_mask=visible.to(q.device), scale=scale)
        outputs.append(out.permute(2, 0, 1, 3))
        start += q_len
    return torch.cat(outputs)[None]


def scenario(shapes, num_kv_heads, group, head_dim=16, block_size=4, seed=0):
    """Sequences (context_len, query_len) over shuffled blocks of a cache whose earlier keys exist."""
    gen = torch.Generator().manual_seed(seed)
    needed = [-(-(c + q) // block_size) for c, q in shapes]
    num_blocks = sum(needed) + 3
    free = list(range(num_blocks))
    random.Random(seed).shuffle(free)
    tables = [[free.pop() for _ in range(n)] for n in needed]
    cache = torch.randn(2, num_blocks, block_size, num_kv_heads, head_dim, generator=gen)
    meta = AttentionMetadata.build([q for _, q in shapes], [c for c, _ in shapes], tables, block_size, device=DEVICE)
    heads = num_kv_heads * group
    query = torch.randn(meta.num_tokens, heads, head_dim, generator=gen)
    key, value = torch.randn(2, meta.num_tokens, num_kv_heads, head_dim, generator=gen)
    return [t.to(DEVICE) for t in (query, key, value, cache)], meta


@pytest.mark.parametrize("shapes, num_kv_heads, group", [
    ([(0, 7), (5, 3), (9, 1), (0, 1)], 2, 2),   # prefill, chunked prefill, decodes
    ([(3, 6), (0, 13)], 1, 4),                  # ends mid-block, GQA 4
    ([(12, 1), (4, 1)], 2, 1),                  # decode only: the Triton kernel
])
def test_matches_the_reference_backend(shapes, num_kv_heads, group):
    (query, key, value, cache), meta = scenario(shapes, num_kv_heads, group)
    reference_cache = cache.clone()
    expected = get_attention_backend("torch").forward(query, key, value, reference_cache, meta, 0.25)
    got = XformersPrefillBackend(padded_keys_attention).forward(query, key, value, cache, meta, 0.25)
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(cache, reference_cache)  # the same keys and values written


@pytest.mark.skipif(not torch.cuda.is_available() or importlib.util.find_spec("xformers") is None,
                    reason="needs CUDA and xformers")
def test_real_xformers_matches_the_reference_on_cuda():
    (query, key, value, cache), meta = scenario([(0, 37), (20, 9), (64, 1)], 2, 3, head_dim=64, block_size=16)
    bf16 = [t.bfloat16() for t in (query, key, value, cache)]
    expected = get_attention_backend("torch").forward(*(t.float() for t in bf16), meta, 0.125)
    got = get_attention_backend("xformers").forward(*bf16, meta, 0.125)
    assert (got.float() - expected).abs().max() < 3e-2
