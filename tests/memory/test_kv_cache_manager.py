from __future__ import annotations

import pytest

from memory.block_hash import hash_full_blocks
from memory.kv_cache_manager import KVCacheManager

BLOCK_SIZE = 4


def make_manager(num_blocks: int = 8, enable_prefix_caching: bool = True) -> KVCacheManager:
    return KVCacheManager(num_blocks, BLOCK_SIZE, enable_prefix_caching)


def admit(manager: KVCacheManager, request_id: str, tokens: list[int]) -> bool:
    """Runs a prompt the way the scheduler does: look up, allocate, compute, cache."""
    hashes = hash_full_blocks(tokens, BLOCK_SIZE)
    prefix = manager.find_cached_prefix(hashes, (len(tokens) - 1) // BLOCK_SIZE)
    if not manager.allocate_slots(request_id, len(tokens), prefix):
        return False
    manager.cache_full_blocks(request_id, hashes, len(tokens))
    return True


def test_rejects_bad_block_size():
    with pytest.raises(ValueError):
        KVCacheManager(4, 0)


def test_allocate_rounds_up_to_whole_blocks():
    manager = make_manager()
    assert manager.allocate_slots("a", 5)
    assert manager.num_request_blocks("a") == 2
    assert manager.block_ids("a") == [0, 1]
    assert manager.num_used_blocks == 2 and manager.num_free_blocks == 6
    assert manager.usage == pytest.approx(0.25)


def test_allocate_grows_only_when_crossing_a_block_boundary():
    manager = make_manager()
    assert manager.allocate_slots("a", 4)
    assert manager.allocate_slots("a", 4)
    assert manager.num_request_blocks("a") == 1
    assert manager.allocate_slots("a", 5)
    assert manager.block_ids("a") == [0, 1]
    assert manager.allocate_slots("a", 3)
    assert manager.num_request_blocks("a") == 2


def test_allocate_zero_tokens_registers_request_without_blocks():
    manager = make_manager()
    assert manager.allocate_slots("a", 0)
    assert manager.block_ids("a") == []
    assert manager.num_free_blocks == 8


def test_allocate_negative_tokens_raises():
    with pytest.raises(ValueError):
        make_manager().allocate_slots("a", -1)


def test_allocate_is_all_or_nothing():
    manager = make_manager(num_blocks=4)
    assert manager.allocate_slots("a", 8)
    assert not manager.allocate_slots("b", 12)
    assert manager.num_request_blocks("b") == 0
    assert manager.num_free_blocks == 2
    assert not manager.allocate_slots("a", 20)
    assert manager.block_ids("a") == [0, 1]
    assert manager.num_free_blocks == 2
    assert manager.allocate_slots("b", 8)
    assert manager.num_free_blocks == 0


def test_free_returns_every_block_and_unknown_id_is_noop():
    manager = make_manager()
    manager.allocate_slots("a", 9)
    manager.free("a")
    assert manager.num_free_blocks == 8
    assert manager.block_ids("a") == []
    manager.free("a")
    manager.free("never-seen")
    assert manager.num_free_blocks == 8


def test_identical_prefixes_share_blocks():
    manager = make_manager()
    prompt = list(range(10))
    assert admit(manager, "a", prompt)
    assert admit(manager, "b", prompt)
    shared = manager.block_ids("a")[:2]
    assert manager.block_ids("b")[:2] == shared
    assert manager.block_ids("b")[2] != manager.block_ids("a")[2]
    pool_blocks = manager.block_pool.blocks
    assert [pool_blocks[i].ref_count for i in shared] == [2, 2]
    assert manager.num_used_blocks == 4
    assert manager.prefix_cache_stats.hits == 2
    assert manager.prefix_cache_stats.queries == 4
    assert manager.prefix_cache_stats.hit_rate == pytest.approx(0.5)


def test_prefix_hit_never_covers_the_last_token():
    manager = make_manager()
    prompt = list(range(8))
    assert admit(manager, "a", prompt)
    hashes = hash_full_blocks(prompt, BLOCK_SIZE)
    assert len(manager.find_cached_prefix(hashes, (len(prompt) - 1) // BLOCK_SIZE)) == 1
    assert len(manager.find_cached_prefix(hashes, 0)) == 0


def test_prefix_lookup_stops_at_first_miss():
    manager = make_manager()
    assert admit(manager, "a", list(range(13)))
    other = list(range(4)) + [99] * 4 + list(range(8, 13))
    hits = manager.find_cached_prefix(hash_full_blocks(other, BLOCK_SIZE), 3)
    assert [block.block_id for block in hits] == manager.block_ids("a")[:1]


def test_divergent_suffix_does_not_match_later_blocks():
    manager = make_manager()
    assert admit(manager, "a", list(range(12)))
    changed_first_block = [99] + list(range(1, 12))
    assert manager.find_cached_prefix(hash_full_blocks(changed_first_block, BLOCK_SIZE), 3) == []


def test_freed_request_prefix_is_revived_from_free_queue():
    manager = make_manager(num_blocks=4)
    prompt = list(range(9))
    assert admit(manager, "a", prompt)
    first_blocks = manager.block_ids("a")[:2]
    manager.free("a")
    assert manager.num_free_blocks == 4
    assert admit(manager, "b", prompt)
    assert manager.block_ids("b")[:2] == first_blocks
    assert manager.num_free_blocks == 1


def test_free_cached_prefix_blocks_are_counted_when_checking_space():
    manager = make_manager(num_blocks=4)
    prompt = list(range(9))
    assert admit(manager, "a", prompt)
    manager.free("a")
    hashes = hash_full_blocks(prompt + list(range(9, 16)), BLOCK_SIZE)
    prefix = manager.find_cached_prefix(hashes, 2)
    assert len(prefix) == 2
    # 2 revived + 3 new = 5 blocks > 4: a check that counted the 2 free cached blocks as also
    # available for new blocks would wrongly accept this.
    assert not manager.allocate_slots("b", 17, prefix)
    assert manager.num_free_blocks == 4
    assert all(block.ref_count == 0 for block in prefix)
    assert manager.block_ids("b") == []
    assert manager.allocate_slots("b", 16, prefix)
    assert manager.num_free_blocks == 0


def test_cached_prefix_only_on_first_call():
    manager = make_manager()
    prompt = list(range(9))
    assert admit(manager, "a", prompt)
    prefix = manager.find_cached_prefix(hash_full_blocks(prompt, BLOCK_SIZE), 2)
    assert manager.allocate_slots("b", 4)
    with pytest.raises(ValueError):
        manager.allocate_slots("b", 12, prefix)


def test_cached_prefix_longer_than_tokens_raises():
    manager = make_manager()
    assert admit(manager, "a", list(range(9)))
    prefix = manager.find_cached_prefix(hash_full_blocks(list(range(9)), BLOCK_SIZE), 2)
    with pytest.raises(ValueError):
        manager.allocate_slots("b", 4, prefix)


def test_evicted_cached_prefix_is_refused():
    manager = make_manager(num_blocks=2)
    prompt = list(range(5))
    assert admit(manager, "a", prompt)
    manager.free("a")
    prefix = manager.find_cached_prefix(hash_full_blocks(prompt, BLOCK_SIZE), 1)
    assert manager.allocate_slots("other", 8)
    with pytest.raises(ValueError):
        manager.allocate_slots("b", 5, prefix)


def test_cache_full_blocks_only_registers_computed_full_blocks():
    manager = make_manager()
    tokens = list(range(11))
    hashes = hash_full_blocks(tokens, BLOCK_SIZE)
    assert manager.allocate_slots("a", 11)
    manager.cache_full_blocks("a", hashes, 7)
    pool = manager.block_pool
    assert pool.lookup(hashes[0]).block_id == manager.block_ids("a")[0]
    assert pool.lookup(hashes[1]) is None
    manager.cache_full_blocks("a", hashes, 11)
    assert pool.lookup(hashes[1]).block_id == manager.block_ids("a")[1]
    assert pool.num_cached_blocks == 2
    assert pool.blocks[manager.block_ids("a")[2]].block_hash is None


def test_cache_full_blocks_beyond_owned_slots_raises():
    manager = make_manager()
    tokens = list(range(8))
    assert manager.allocate_slots("a", 4)
    with pytest.raises(ValueError):
        manager.cache_full_blocks("a", hash_full_blocks(tokens, BLOCK_SIZE), 8)


def test_decode_growth_caches_blocks_as_they_fill():
    manager = make_manager()
    tokens = list(range(3))
    assert manager.allocate_slots("a", 3)
    for next_token in range(3, 9):
        tokens.append(next_token)
        assert manager.allocate_slots("a", len(tokens))
        manager.cache_full_blocks("a", hash_full_blocks(tokens, BLOCK_SIZE), len(tokens))
    assert manager.block_pool.num_cached_blocks == 2
    assert manager.num_request_blocks("a") == 3


def test_free_releases_in_reverse_so_prefix_tail_is_evicted_first():
    manager = make_manager(num_blocks=3)
    prompt = list(range(12))
    assert admit(manager, "a", prompt)
    a_blocks = manager.block_ids("a")
    manager.free("a")
    assert [b.block_id for b in manager.block_pool.free_blocks()] == a_blocks[::-1]
    assert manager.allocate_slots("b", 4)
    assert manager.block_ids("b") == [a_blocks[2]]
    hashes = hash_full_blocks(prompt, BLOCK_SIZE)
    assert [b.block_id for b in manager.find_cached_prefix(hashes, 3)] == a_blocks[:2]


def test_extra_key_separates_caches():
    manager = make_manager()
    prompt = list(range(9))
    hashes = hash_full_blocks(prompt, BLOCK_SIZE, extra_key="voice-a")
    assert manager.allocate_slots("a", 9)
    manager.cache_full_blocks("a", hashes, 9)
    other_voice = hash_full_blocks(prompt, BLOCK_SIZE, extra_key="voice-b")
    assert manager.find_cached_prefix(other_voice, 2) == []
    assert len(manager.find_cached_prefix(hashes, 2)) == 2


def test_disabled_prefix_caching_shares_nothing():
    manager = make_manager(enable_prefix_caching=False)
    prompt = list(range(9))
    assert admit(manager, "a", prompt)
    assert admit(manager, "b", prompt)
    assert set(manager.block_ids("a")).isdisjoint(manager.block_ids("b"))
    assert manager.block_pool.num_cached_blocks == 0
    assert manager.prefix_cache_stats.queries == 0
    manager.free("a")
    manager.free("b")
    assert manager.num_free_blocks == 8
