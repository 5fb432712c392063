"""The reference paged attention backend against naive dense per-sequence attention."""
from __future__ import annotations

import random

import pytest
import torch

from model.attention import AttentionBackend, AttentionMetadata, get_attention_backend

HEAD_DIM = 8


# Stale cache memory: finite (the engine's pool starts zeroed and holds only real K/V) but large,
# so a slot read where the mask should hide it swings the output far past the tolerance.
STALE = 50.0

def naive_causal_attention(query, keys, values, context_len, scale):
    """query [q, H, D] at positions context_len.., keys/values [S, KVH, D] for positions 0..S-1, in float64."""
    groups = query.shape[1] // keys.shape[1]
    keys = keys.double().repeat_interleave(groups, dim=1)
    values = values.double().repeat_interleave(groups, dim=1)
    rows = []
    for j in range(query.shape[0]):
        visible = context_len + j + 1
        scores = torch.einsum("hd,shd->hs", query[j].double(), keys[:visible]) * scale
        rows.append(torch.einsum("hs,shd->hd", scores.softmax(dim=-1), values[:visible]))
    return torch.stack(rows)


def slot_of(table, position, block_size):
    return table[position // block_size] * block_size + position % block_size


class PagedScenario:
    """Sequences (context_len, query_len) with shuffled, non-contiguous blocks; cached history already written
    into the cache; every slot no sequence owns holds STALE."""

    def __init__(self, shapes, num_kv_heads, groups, block_size, seed, dtype=torch.float32):
        gen = torch.Generator().manual_seed(seed)
        rng = random.Random(seed)
        self.shapes, self.block_size = shapes, block_size
        self.num_heads = num_kv_heads * groups
        blocks_needed = [-(-(ctx + q) // block_size) for ctx, q in shapes]
        num_blocks = sum(blocks_needed) + 3
        free = list(range(num_blocks))
        rng.shuffle(free)
        self.tables = [[free.pop() for _ in range(n)] for n in blocks_needed]
        self.cache = torch.full((2, num_blocks, block_size, num_kv_heads, HEAD_DIM), STALE, dtype=dtype)
        flat = self.cache.view(2, -1, num_kv_heads, HEAD_DIM)
        self.full_kv = []
        for (ctx, q), table in zip(shapes, self.tables):
            full = torch.randn(2, ctx + q, num_kv_heads, HEAD_DIM, generator=gen).to(dtype)
            for p in range(ctx):
                flat[:, slot_of(table, p, block_size)] = full[:, p]
            self.full_kv.append(full)
        total = sum(q for _, q in shapes)
        self.query = torch.randn(total, self.num_heads, HEAD_DIM, generator=gen).to(dtype)
        self.new_kv = torch.cat([full[:, ctx:] for full, (ctx, _) in zip(self.full_kv, shapes)], dim=1)

    def metadata(self):
        return AttentionMetadata.build([q for _, q in self.shapes], [ctx for ctx, _ in self.shapes],
                                       self.tables, self.block_size)

    def run(self, backend: AttentionBackend):
        return backend.forward(self.query, self.new_kv[0], self.new_kv[1], self.cache, self.metadata(),
                               HEAD_DIM ** -0.5)

    def expected_output(self):
        outputs, start = [], 0
        for (ctx, q), full in zip(self.shapes, self.full_kv):
            outputs.append(naive_causal_attention(self.query[start:start + q], full[0], full[1], ctx,
                                                  HEAD_DIM ** -0.5))
            start += q
        return torch.cat(outputs)

    def assert_cache_holds_exactly_the_sequences(self):
        flat = self.cache.view(2, -1, *self.cache.shape[3:])
        owned = set()
        for (ctx, q), table, full in zip(self.shapes, self.tables, self.full_kv):
            for p in range(ctx + q):
                slot = slot_of(table, p, self.block_size)
                owned.add(slot)
                torch.testing.assert_close(flat[:, slot], full[:, p], rtol=0, atol=0)
        untouched = [s for s in range(flat.shape[1]) if s not in owned]
        assert (flat[:, untouched] == STALE).all()


@pytest.fixture(scope="module")
def backend() -> AttentionBackend:
    return get_attention_backend("torch")


MIXED_BATCH = [(0, 7), (5, 6), (13, 1), (3, 1), (8, 4), (0, 1), (15, 1)]


@pytest.mark.parametrize("groups", [1, 2, 4])
@pytest.mark.parametrize("block_size", [4, 16])
def test_mixed_prefill_and_decode_match_dense_attention(backend, groups, block_size):
    scenario = PagedScenario(MIXED_BATCH, num_kv_heads=2, groups=groups, block_size=block_size, seed=groups)
    out = scenario.run(backend)
    assert out.shape == scenario.query.shape and out.dtype == torch.float32
    torch.testing.assert_close(out.double(), scenario.expected_output(), rtol=1e-5, atol=1e-5)
    scenario.assert_cache_holds_exactly_the_sequences()


def test_random_batches_match_dense_attention(backend):
    rng = random.Random(0)
    for seed in range(12):
        shapes = [(rng.randint(0, 30), rng.choice([1, 1, rng.randint(1, 9)])) for _ in range(rng.randint(1, 6))]
        scenario = PagedScenario(shapes, num_kv_heads=rng.choice([1, 2]), groups=rng.choice([1, 2, 4]),
                                 block_size=rng.choice([1, 3, 8]), seed=seed)
        torch.testing.assert_close(scenario.run(backend).double(), scenario.expected_output(),
                                   rtol=1e-5, atol=1e-5)
        scenario.assert_cache_holds_exactly_the_sequences()


def test_many_decoding_streams(backend):
    shapes = [(ctx, 1) for ctx in range(64)]
    scenario = PagedScenario(shapes, num_kv_heads=2, groups=2, block_size=16, seed=7)
    torch.testing.assert_close(scenario.run(backend).double(), scenario.expected_output(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shapes", [[(37, 1)], [(10, 1)] * 3, [(0, 1)]])
def test_decode_of_equally_long_sequences(backend, shapes):
    # The reference backend runs these without a mask: every gathered key is visible.
    scenario = PagedScenario(shapes, num_kv_heads=2, groups=2, block_size=8, seed=11)
    torch.testing.assert_close(scenario.run(backend).double(), scenario.expected_output(), rtol=1e-5, atol=1e-5)


def test_bfloat16_keeps_dtype_and_stays_close(backend):
    scenario = PagedScenario([(6, 3), (9, 1)], num_kv_heads=1, groups=4, block_size=4, seed=3,
                             dtype=torch.bfloat16)
    out = scenario.run(backend)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.double(), scenario.expected_output(), rtol=0, atol=3e-2)


def test_build_computes_slots_from_block_tables():
    meta = AttentionMetadata.build(query_lens=[3, 1], context_lens=[2, 5], block_tables=[[4, 1], [2, 0, 3]],
                                   block_size=4)
    # sequence 0: positions 2, 3 in block 4, position 4 in block 1; sequence 1: position 5 in block 0.
    assert meta.slot_mapping.tolist() == [18, 19, 4, 1]
    assert meta.slot_mapping.dtype == torch.int64
    assert meta.query_start_loc.tolist() == [0, 3, 4] and meta.query_start_loc.dtype == torch.int32
    assert meta.seq_lens.tolist() == [5, 6] and meta.seq_lens.dtype == torch.int32
    assert meta.block_tables.tolist() == [[4, 1, 0], [2, 0, 3]] and meta.block_tables.dtype == torch.int32
    assert (meta.max_query_len, meta.max_seq_len, meta.num_seqs, meta.num_tokens) == (3, 6, 2, 4)


@pytest.mark.parametrize("query_lens, context_lens, tables", [
    ([3], [2], [[0]]),          # 5 tokens do not fit one block of 4
    ([1, 1], [0], [[0], [1]]),  # lengths disagree
    ([0], [2], [[0]]),          # a sequence without new tokens
    ([], [], []),
])
def test_build_rejects_inconsistent_batches(query_lens, context_lens, tables):
    with pytest.raises(ValueError):
        AttentionMetadata.build(query_lens, context_lens, tables, block_size=4)


def test_backend_registry():
    assert get_attention_backend("torch").name == "torch"
    with pytest.raises(ValueError, match="torch"):
        get_attention_backend("no-such-backend")


def test_subset_keeps_each_sequence_and_its_tokens():
    meta = AttentionMetadata.build(query_lens=[3, 1, 2], context_lens=[2, 5, 0], block_tables=[[4, 1], [2, 0], [3]],
                                   block_size=4)
    assert meta.token_rows([2, 1]) == [4, 5, 3]
    part = meta.subset([2, 1])
    assert part.query_lens == [2, 1] and part.context_lens == [0, 5]
    assert part.query_start_loc.tolist() == [0, 2, 3] and part.seq_lens.tolist() == [2, 6]
    assert part.block_tables.tolist() == [[3, 0], [2, 0]]
    assert part.slot_mapping.tolist() == [meta.slot_mapping[r].item() for r in (4, 5, 3)]
    assert (part.max_query_len, part.max_seq_len) == (2, 6)


def test_decoding_streams_are_not_padded_to_a_prefill_chunk(backend):
    # The plan attends decoding and prefilling sequences apart: padding a decode row to a long
    # prefill chunk multiplies the step's attention by the number of streams.
    scenario = PagedScenario([(40, 1), (0, 33), (12, 1)], num_kv_heads=2, groups=2, block_size=8, seed=5)
    torch.testing.assert_close(scenario.run(backend).double(), scenario.expected_output(), rtol=1e-5, atol=1e-5)
    widths = sorted(group.meta.max_query_len for group in backend._plan)
    assert widths == [1, 33]
    # Each group's batch writes the cache slots of the step's rows it stands for.
    step = scenario.metadata()
    for group in backend._plan:
        assert group.meta.slot_mapping.tolist() == step.slot_mapping[group.rows].tolist()
