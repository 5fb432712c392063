"""Fixed pool of KV-cache blocks: free queue, reference counts and the prefix-cache hash map."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass


class NoFreeBlocksError(RuntimeError):
    """Raised when allocate() asks for more blocks than are free; the pool is unchanged."""


class DoubleFreeError(RuntimeError):
    """Raised when a block would be released more often than referenced; the pool is unchanged."""


@dataclass(slots=True, eq=False)
class KVBlock:
    """One block of KV slots. It is free (ref_count == 0, linked into the free queue) or owned
    (ref_count >= 1, unlinked); a non-None block_hash means the pool's hash map points at it."""

    block_id: int
    ref_count: int = 0
    block_hash: int | None = None
    prev_free: KVBlock | None = None
    next_free: KVBlock | None = None


class FreeBlockQueue:
    """Intrusive doubly linked list of free blocks between two sentinels, ordered from the block
    to reuse first (head) to the block to keep longest (tail); a block is linked at most once."""

    def __init__(self, blocks: Iterable[KVBlock] = ()) -> None:
        self._head = KVBlock(block_id=-1)
        self._tail = KVBlock(block_id=-1)
        self._head.next_free = self._tail
        self._tail.prev_free = self._head
        self._len = 0
        for block in blocks:
            self.append(block)

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[KVBlock]:
        node = self._head.next_free
        while node is not self._tail:
            assert node is not None
            yield node
            node = node.next_free

    def popleft(self) -> KVBlock:
        if self._len == 0:
            raise IndexError("pop from an empty FreeBlockQueue")
        block = self._head.next_free
        assert block is not None
        self.remove(block)
        return block

    def remove(self, block: KVBlock) -> None:
        if block.prev_free is None or block.next_free is None:
            raise ValueError(f"block {block.block_id} is not in the free queue")
        block.prev_free.next_free = block.next_free
        block.next_free.prev_free = block.prev_free
        block.prev_free = block.next_free = None
        self._len -= 1

    def append(self, block: KVBlock) -> None:
        self._link_after(self._tail.prev_free, block)

    def appendleft(self, block: KVBlock) -> None:
        self._link_after(self._head, block)

    def _link_after(self, anchor: KVBlock | None, block: KVBlock) -> None:
        assert anchor is not None and anchor.next_free is not None
        if block.prev_free is not None or block.next_free is not None:
            raise ValueError(f"block {block.block_id} is already in the free queue")
        block.prev_free = anchor
        block.next_free = anchor.next_free
        anchor.next_free.prev_free = block
        anchor.next_free = block
        self._len += 1


class BlockPool:
    """Owns every KVBlock. Each block is either free (ref_count 0, in the free queue) or owned
    (ref_count >= 1, not in the queue). The hash map points only at blocks whose block_hash is
    that key. The free queue doubles as the eviction LRU: a block whose last reference goes
    joins the tail if hashed (a prefix hit may revive it, and it is evicted last) or the head if
    plain (reused first); allocate() pops from the head and evicts a popped block's hash."""

    def __init__(self, num_blocks: int, enable_prefix_caching: bool = True) -> None:
        if num_blocks <= 0:
            raise ValueError(f"num_blocks must be positive, got {num_blocks}")
        self.enable_prefix_caching = enable_prefix_caching
        self.blocks = [KVBlock(block_id=i) for i in range(num_blocks)]
        self._free = FreeBlockQueue(self.blocks)
        self._cached: dict[int, KVBlock] = {}

    @property
    def num_blocks(self) -> int:
        return len(self.blocks)

    @property
    def num_free_blocks(self) -> int:
        return len(self._free)

    @property
    def num_cached_blocks(self) -> int:
        return len(self._cached)

    @property
    def usage(self) -> float:
        return (self.num_blocks - self.num_free_blocks) / self.num_blocks

    def free_blocks(self) -> Iterator[KVBlock]:
        return iter(self._free)

    def allocate(self, num_blocks: int) -> list[KVBlock]:
        if num_blocks < 0:
            raise ValueError(f"cannot allocate {num_blocks} blocks")
        if num_blocks > len(self._free):
            raise NoFreeBlocksError(f"asked for {num_blocks} blocks, {len(self._free)} free")
        allocated = []
        for _ in range(num_blocks):
            block = self._free.popleft()
            self._evict(block)
            block.ref_count = 1
            allocated.append(block)
        return allocated

    def free(self, blocks: Iterable[KVBlock]) -> None:
        blocks = list(blocks)
        # NOTE: validate every release before changing any count, so a double free leaves the
        # pool exactly as it was instead of half-released.
        for block, releases in Counter(blocks).items():
            if releases > block.ref_count:
                raise DoubleFreeError(
                    f"block {block.block_id} released {releases} times, "
                    f"ref_count {block.ref_count}"
                )
        for block in blocks:
            block.ref_count -= 1
            if block.ref_count == 0:
                if block.block_hash is None:
                    self._free.appendleft(block)
                else:
                    self._free.append(block)

    def lookup(self, block_hash: int) -> KVBlock | None:
        return self._cached.get(block_hash)

    def touch(self, blocks: Iterable[KVBlock]) -> None:
        for block in blocks:
            if block.ref_count == 0:
                self._free.remove(block)
            block.ref_count += 1

    def cache_block(self, block: KVBlock, block_hash: int) -> None:
        if not self.enable_prefix_caching:
            return
        if block.ref_count == 0:
            raise ValueError(f"block {block.block_id} is free; only owned blocks can be cached")
        if block.block_hash is not None:
            if block.block_hash != block_hash:
                raise ValueError(f"block {block.block_id} is already cached under another hash")
            return
        if block_hash in self._cached:
            # NOTE: the existing block already serves this prefix; this duplicate stays plain
            # so that freeing it puts it at the head, where it is reused first.
            return
        block.block_hash = block_hash
        self._cached[block_hash] = block

    def reset_prefix_cache(self) -> bool:
        # NOTE: refused while any block is owned: running requests count on their cached blocks
        # staying registered, and an owned block's hash cannot be dropped from under them.
        if self.num_free_blocks != self.num_blocks:
            return False
        for block in self._cached.values():
            block.block_hash = None
        self._cached.clear()
        return True

    def _evict(self, block: KVBlock) -> None:
        if block.block_hash is not None:
            del self._cached[block.block_hash]
            block.block_hash = None
