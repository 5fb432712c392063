from __future__ import annotations

import pytest

from memory.block_pool import BlockPool, DoubleFreeError, FreeBlockQueue, KVBlock, NoFreeBlocksError


def ids(blocks) -> list[int]:
    return [block.block_id for block in blocks]


def make_blocks(n: int) -> list[KVBlock]:
    return [KVBlock(block_id=i) for i in range(n)]


class TestFreeBlockQueue:
    def test_keeps_insertion_order(self):
        queue = FreeBlockQueue(make_blocks(4))
        assert len(queue) == 4
        assert ids(queue) == [0, 1, 2, 3]

    def test_popleft_takes_head(self):
        queue = FreeBlockQueue(make_blocks(3))
        assert queue.popleft().block_id == 0
        assert ids(queue) == [1, 2]
        assert len(queue) == 2

    def test_popleft_empty_raises(self):
        queue = FreeBlockQueue()
        with pytest.raises(IndexError):
            queue.popleft()

    def test_remove_from_middle_head_and_tail(self):
        blocks = make_blocks(5)
        queue = FreeBlockQueue(blocks)
        queue.remove(blocks[2])
        queue.remove(blocks[0])
        queue.remove(blocks[4])
        assert ids(queue) == [1, 3]
        assert len(queue) == 2
        assert blocks[2].prev_free is None and blocks[2].next_free is None

    def test_append_and_appendleft(self):
        blocks = make_blocks(4)
        queue = FreeBlockQueue(blocks[1:3])
        queue.append(blocks[3])
        queue.appendleft(blocks[0])
        assert ids(queue) == [0, 1, 2, 3]
        assert len(queue) == 4

    def test_relinking_a_linked_block_raises(self):
        blocks = make_blocks(2)
        queue = FreeBlockQueue(blocks)
        with pytest.raises(ValueError):
            queue.append(blocks[0])
        with pytest.raises(ValueError):
            queue.appendleft(blocks[1])
        assert ids(queue) == [0, 1]

    def test_removing_an_unlinked_block_raises(self):
        queue = FreeBlockQueue(make_blocks(1))
        with pytest.raises(ValueError):
            queue.remove(KVBlock(block_id=9))
        assert len(queue) == 1

    def test_drain_and_refill(self):
        blocks = make_blocks(3)
        queue = FreeBlockQueue(blocks)
        popped = [queue.popleft() for _ in range(3)]
        assert len(queue) == 0 and list(queue) == []
        for block in reversed(popped):
            queue.appendleft(block)
        assert ids(queue) == [0, 1, 2]


class TestBlockPoolAllocation:
    def test_initial_state(self):
        pool = BlockPool(4)
        assert pool.num_blocks == 4
        assert pool.num_free_blocks == 4
        assert pool.usage == 0.0
        assert ids(pool.free_blocks()) == [0, 1, 2, 3]

    def test_rejects_empty_pool(self):
        with pytest.raises(ValueError):
            BlockPool(0)

    def test_allocate_pops_from_head_with_one_reference(self):
        pool = BlockPool(4)
        blocks = pool.allocate(3)
        assert ids(blocks) == [0, 1, 2]
        assert all(block.ref_count == 1 for block in blocks)
        assert pool.num_free_blocks == 1
        assert pool.usage == pytest.approx(0.75)

    def test_allocate_zero(self):
        pool = BlockPool(2)
        assert pool.allocate(0) == []
        assert pool.num_free_blocks == 2

    def test_allocate_negative_raises(self):
        with pytest.raises(ValueError):
            BlockPool(2).allocate(-1)

    def test_allocate_too_many_raises_and_changes_nothing(self):
        pool = BlockPool(3)
        pool.allocate(2)
        with pytest.raises(NoFreeBlocksError):
            pool.allocate(2)
        assert pool.num_free_blocks == 1
        assert ids(pool.free_blocks()) == [2]

    def test_free_plain_blocks_go_to_head(self):
        pool = BlockPool(4)
        first, second = pool.allocate(2)
        pool.free([first])
        pool.free([second])
        assert ids(pool.free_blocks()) == [1, 0, 2, 3]
        assert first.ref_count == 0 and second.ref_count == 0
        assert pool.allocate(1)[0] is second

    def test_free_cached_blocks_go_to_tail_in_order(self):
        pool = BlockPool(4)
        blocks = pool.allocate(3)
        for block, block_hash in zip(blocks, (100, 101, 102)):
            pool.cache_block(block, block_hash)
        pool.free([blocks[2], blocks[0], blocks[1]])
        assert ids(pool.free_blocks()) == [3, 2, 0, 1]

    def test_free_only_releases_at_zero_references(self):
        pool = BlockPool(2)
        (block,) = pool.allocate(1)
        pool.touch([block])
        pool.free([block])
        assert block.ref_count == 1
        assert pool.num_free_blocks == 1
        pool.free([block])
        assert pool.num_free_blocks == 2

    def test_double_free_raises(self):
        pool = BlockPool(2)
        (block,) = pool.allocate(1)
        pool.free([block])
        with pytest.raises(DoubleFreeError):
            pool.free([block])
        assert pool.num_free_blocks == 2
        assert block.ref_count == 0

    def test_double_free_within_one_call_changes_nothing(self):
        pool = BlockPool(3)
        first, second = pool.allocate(2)
        with pytest.raises(DoubleFreeError):
            pool.free([first, second, second])
        assert first.ref_count == 1 and second.ref_count == 1
        assert pool.num_free_blocks == 1


class TestBlockPoolPrefixCache:
    def test_cache_and_lookup(self):
        pool = BlockPool(2)
        (block,) = pool.allocate(1)
        assert pool.lookup(7) is None
        pool.cache_block(block, 7)
        assert pool.lookup(7) is block
        assert block.block_hash == 7
        assert pool.num_cached_blocks == 1

    def test_existing_mapping_wins(self):
        pool = BlockPool(3)
        original, duplicate = pool.allocate(2)
        pool.cache_block(original, 7)
        pool.cache_block(duplicate, 7)
        assert pool.lookup(7) is original
        assert duplicate.block_hash is None
        pool.free([original, duplicate])
        # the duplicate is plain, so it is reused before the free block 2 and the cached original
        assert ids(pool.free_blocks()) == [1, 2, 0]

    def test_recaching_with_same_hash_is_noop(self):
        pool = BlockPool(1)
        (block,) = pool.allocate(1)
        pool.cache_block(block, 7)
        pool.cache_block(block, 7)
        assert pool.lookup(7) is block and pool.num_cached_blocks == 1

    def test_recaching_with_other_hash_raises(self):
        pool = BlockPool(1)
        (block,) = pool.allocate(1)
        pool.cache_block(block, 7)
        with pytest.raises(ValueError):
            pool.cache_block(block, 8)
        assert pool.lookup(7) is block and pool.lookup(8) is None

    def test_caching_a_free_block_raises(self):
        pool = BlockPool(1)
        with pytest.raises(ValueError):
            pool.cache_block(pool.blocks[0], 7)
        assert pool.lookup(7) is None

    def test_cached_free_block_survives_until_reused(self):
        pool = BlockPool(2)
        (block,) = pool.allocate(1)
        pool.cache_block(block, 7)
        pool.free([block])
        assert pool.lookup(7) is block
        assert block.block_hash == 7
        assert pool.num_free_blocks == 2

    def test_reuse_evicts_hash(self):
        pool = BlockPool(1)
        (block,) = pool.allocate(1)
        pool.cache_block(block, 7)
        pool.free([block])
        (reused,) = pool.allocate(1)
        assert reused is block
        assert pool.lookup(7) is None
        assert reused.block_hash is None
        assert pool.num_cached_blocks == 0

    def test_lru_eviction_order(self):
        pool = BlockPool(3)
        blocks = pool.allocate(3)
        for block, block_hash in zip(blocks, (10, 11, 12)):
            pool.cache_block(block, block_hash)
        pool.free([blocks[1]])
        pool.free([blocks[2]])
        pool.free([blocks[0]])
        evicted = pool.allocate(2)
        assert ids(evicted) == [1, 2]
        assert pool.lookup(11) is None and pool.lookup(12) is None
        assert pool.lookup(10) is blocks[0]

    def test_touch_free_cached_block_revives_it(self):
        pool = BlockPool(3)
        (block,) = pool.allocate(1)
        pool.cache_block(block, 7)
        pool.free([block])
        pool.touch([block])
        assert block.ref_count == 1
        assert pool.num_free_blocks == 2
        assert block not in list(pool.free_blocks())
        assert ids(pool.allocate(2)) == [1, 2]
        assert pool.lookup(7) is block

    def test_touch_owned_block_adds_reference(self):
        pool = BlockPool(2)
        (block,) = pool.allocate(1)
        pool.touch([block])
        assert block.ref_count == 2
        assert pool.num_free_blocks == 1

    def test_disabled_prefix_caching_never_caches(self):
        pool = BlockPool(2, enable_prefix_caching=False)
        (block,) = pool.allocate(1)
        pool.cache_block(block, 7)
        assert pool.lookup(7) is None and block.block_hash is None
        pool.free([block])
        assert ids(pool.free_blocks()) == [0, 1]

    def test_reset_prefix_cache(self):
        pool = BlockPool(2)
        (block,) = pool.allocate(1)
        pool.cache_block(block, 7)
        assert pool.reset_prefix_cache() is False
        assert pool.lookup(7) is block
        pool.free([block])
        assert pool.reset_prefix_cache() is True
        assert pool.lookup(7) is None and block.block_hash is None
        assert pool.num_cached_blocks == 0 and pool.num_free_blocks == 2
