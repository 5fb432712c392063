from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from memory.block_hash import hash_block, hash_full_blocks
from memory.kv_cache_manager import KVCacheManager

BLOCK_SIZE = 4
NUM_BLOCKS = 8

# Prompts share leading blocks often enough that prefix hits, revivals and evictions all happen.
SHARED_PREFIXES = (
    (),
    (1, 2, 3, 4),
    (1, 2, 3, 4, 5, 6, 7, 8),
    (1, 2, 3, 4, 9, 9, 9, 9),
    (7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7),
)
prompts = st.builds(
    lambda prefix, suffix: list(prefix) + suffix,
    st.sampled_from(SHARED_PREFIXES),
    st.lists(st.integers(0, 3), max_size=6),
).filter(bool)
token_lists = st.lists(st.integers(0, 5), max_size=20)


class KVCacheMachine(RuleBasedStateMachine):
    """Drives a KVCacheManager like a scheduler would and checks it against a model of which
    request holds which tokens, with a simulated KV store that records what each slot holds."""

    def __init__(self) -> None:
        super().__init__()
        self.manager = KVCacheManager(NUM_BLOCKS, BLOCK_SIZE)
        self.pool = self.manager.block_pool
        self.tokens: dict[str, list[int]] = {}
        self.kv: dict[int, list[int | None]] = {i: [None] * BLOCK_SIZE for i in range(NUM_BLOCKS)}
        self.next_id = 0

    def snapshot(self):
        blocks = tuple((block.ref_count, block.block_hash) for block in self.pool.blocks)
        free = tuple(block.block_id for block in self.pool.free_blocks())
        owned = {rid: self.manager.block_ids(rid) for rid in self.tokens}
        return blocks, free, owned

    def compute(self, request_id: str, tokens: list[int], start: int) -> None:
        block_ids = self.manager.block_ids(request_id)
        for position in range(start, len(tokens)):
            block_id = block_ids[position // BLOCK_SIZE]
            assert self.pool.blocks[block_id].ref_count == 1, "wrote KV into a shared block"
            self.kv[block_id][position % BLOCK_SIZE] = tokens[position]
        self.manager.cache_full_blocks(
            request_id, hash_full_blocks(tokens, BLOCK_SIZE), len(tokens)
        )
        self.tokens[request_id] = tokens

    @rule(prompt=prompts)
    def admit(self, prompt: list[int]) -> None:
        request_id = f"r{self.next_id}"
        self.next_id += 1
        hashes = hash_full_blocks(prompt, BLOCK_SIZE)
        prefix = self.manager.find_cached_prefix(hashes, (len(prompt) - 1) // BLOCK_SIZE)
        for index, block in enumerate(prefix):
            expected = prompt[index * BLOCK_SIZE : (index + 1) * BLOCK_SIZE]
            assert self.kv[block.block_id] == expected, "prefix hit returned other tokens' KV"
        before = self.snapshot()
        revived = sum(block.ref_count == 0 for block in prefix)
        fits = -(-len(prompt) // BLOCK_SIZE) - len(prefix) <= self.pool.num_free_blocks - revived
        assert self.manager.allocate_slots(request_id, len(prompt), prefix) == fits
        if fits:
            self.compute(request_id, prompt, len(prefix) * BLOCK_SIZE)
        else:
            assert self.snapshot() == before

    @precondition(lambda self: self.tokens)
    @rule(data=st.data(), new_tokens=st.lists(st.integers(0, 3), min_size=1, max_size=6))
    def grow(self, data: st.DataObject, new_tokens: list[int]) -> None:
        request_id = data.draw(st.sampled_from(sorted(self.tokens)))
        old = self.tokens[request_id]
        tokens = old + new_tokens
        before = self.snapshot()
        needed = -(-len(tokens) // BLOCK_SIZE) - self.manager.num_request_blocks(request_id)
        fits = needed <= self.pool.num_free_blocks
        assert self.manager.allocate_slots(request_id, len(tokens)) == fits
        if fits:
            self.compute(request_id, tokens, len(old))
        else:
            assert self.snapshot() == before

    @precondition(lambda self: self.tokens)
    @rule(data=st.data())
    def finish(self, data: st.DataObject) -> None:
        request_id = data.draw(st.sampled_from(sorted(self.tokens)))
        self.manager.free(request_id)
        del self.tokens[request_id]
        assert self.manager.block_ids(request_id) == []

    @rule()
    def free_unknown(self) -> None:
        before = self.snapshot()
        self.manager.free("unknown")
        assert self.snapshot() == before

    @invariant()
    def ref_counts_match_owners(self) -> None:
        holders = [0] * NUM_BLOCKS
        for request_id in self.tokens:
            for block_id in self.manager.block_ids(request_id):
                holders[block_id] += 1
        assert [block.ref_count for block in self.pool.blocks] == holders

    @invariant()
    def free_queue_holds_exactly_the_unowned_blocks(self) -> None:
        free = list(self.pool.free_blocks())
        assert len(free) == len({block.block_id for block in free}) == self.pool.num_free_blocks
        assert {block.block_id for block in free} == {
            block.block_id for block in self.pool.blocks if block.ref_count == 0
        }
        owned = sum(block.ref_count > 0 for block in self.pool.blocks)
        assert len(free) + owned == NUM_BLOCKS
        assert self.manager.num_used_blocks == owned

    @invariant()
    def hash_map_points_at_matching_blocks(self) -> None:
        hashed = [block for block in self.pool.blocks if block.block_hash is not None]
        assert self.pool.num_cached_blocks == len(hashed)
        for block in hashed:
            assert self.pool.lookup(block.block_hash) is block

    @invariant()
    def requests_own_their_blocks_and_prefix_hashes(self) -> None:
        for request_id, tokens in self.tokens.items():
            block_ids = self.manager.block_ids(request_id)
            assert len(block_ids) == -(-len(tokens) // BLOCK_SIZE)
            hashes = hash_full_blocks(tokens, BLOCK_SIZE)
            for index, block_id in enumerate(block_ids):
                block = self.pool.blocks[block_id]
                if block.block_hash is not None:
                    assert block.block_hash == hashes[index]
                computed = tokens[index * BLOCK_SIZE : (index + 1) * BLOCK_SIZE]
                assert self.kv[block_id][: len(computed)] == computed

    def teardown(self) -> None:
        for request_id in list(self.tokens):
            self.manager.free(request_id)
        assert self.manager.num_free_blocks == NUM_BLOCKS
        assert self.manager.usage == 0.0
        assert all(block.ref_count == 0 for block in self.pool.blocks)


KVCacheMachine.TestCase.settings = settings(
    max_examples=60,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow],
)
TestKVCacheMachine = KVCacheMachine.TestCase


@settings(max_examples=100, deadline=None)
@given(tokens=token_lists, block_size=st.integers(1, 5), cut=st.integers(0, 5))
def test_hashes_of_a_prefix_are_a_prefix_of_the_hashes(tokens, block_size, cut):
    hashes = hash_full_blocks(tokens, block_size)
    assert len(hashes) == len(tokens) // block_size
    assert hash_full_blocks(tokens[: cut * block_size], block_size) == hashes[:cut]
    if hashes:
        assert hash_full_blocks(tokens[block_size:], block_size, parent=hashes[0]) == hashes[1:]


@settings(max_examples=100, deadline=None)
@given(tokens=token_lists.filter(lambda t: len(t) >= 4), data=st.data())
def test_changing_a_token_changes_its_block_and_every_later_one(tokens, data):
    block_size = 2
    position = data.draw(st.integers(0, len(tokens) - 1))
    changed = list(tokens)
    changed[position] += 1
    before = hash_full_blocks(tokens, block_size)
    after = hash_full_blocks(changed, block_size)
    changed_block = position // block_size
    assert before[:changed_block] == after[:changed_block]
    assert all(old != new for old, new in zip(before[changed_block:], after[changed_block:]))


@settings(max_examples=50, deadline=None)
@given(tokens=token_lists.filter(lambda t: len(t) >= 2))
def test_extra_key_separates_every_block(tokens):
    plain = hash_full_blocks(tokens, 2)
    voiced = hash_full_blocks(tokens, 2, extra_key="voice")
    assert all(a != b for a, b in zip(plain, voiced))


def test_hash_is_a_64_bit_int():
    value = hash_block(None, [1, 2, 3])
    assert isinstance(value, int) and 0 <= value < 1 << 64
    assert hash_block(None, [1, 2, 3]) == value
    assert hash_block(value, [1, 2, 3]) != value


def test_distinct_keys_do_not_collide():
    keys = [None, 1, "1", b"1", ("1",), True, ("a", "b"), ("ab",), ("a", ("b",)), 0, False, ""]
    hashes = {hash_block(None, [5], key) for key in keys}
    assert len(hashes) == len(keys)
    assert hash_block(None, [1, 2]) != hash_block(None, [12])
    assert hash_block(None, []) != hash_block(0, [])


def test_unsupported_extra_key_and_out_of_range_token_raise():
    with pytest.raises(TypeError):
        hash_block(None, [1], extra_key=object())
    with pytest.raises(ValueError):
        hash_block(None, [1 << 63])
    with pytest.raises(ValueError):
        hash_full_blocks([1], 0)
