"""Per-request KV block accounting on top of a BlockPool, with prefix-cache reuse."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memory.block_pool import BlockPool, KVBlock


@dataclass(slots=True)
class PrefixCacheStats:
    """Counts in blocks since the manager was built: hits <= queries."""

    hits: int = 0
    queries: int = 0

    @property
    def hit_rate(self) -> float:
        return self.hits / self.queries if self.queries else 0.0


class KVCacheManager:
    """Maps each request to the blocks holding its KV, in token order. Every block is either
    free (in the pool's free queue, ref 0) or owned (ref >= 1 = the number of requests listing
    it, never in the queue). A freed request returns every block it listed. A cached block's
    hash identifies its whole prefix (parent hash chain + its tokens), so a prefix hit may share
    it between requests; each request's leading registered blocks are counted so that every
    full block is offered to the hash map once."""

    def __init__(
        self, num_blocks: int, block_size: int, enable_prefix_caching: bool = True
    ) -> None:
        if block_size <= 0:
            raise ValueError(f"block_size must be positive, got {block_size}")
        self.block_size = block_size
        self.enable_prefix_caching = enable_prefix_caching
        self.block_pool = BlockPool(num_blocks, enable_prefix_caching)
        self.prefix_cache_stats = PrefixCacheStats()
        self._blocks: dict[str, list[KVBlock]] = {}
        self._num_cached: dict[str, int] = {}

    @property
    def num_blocks(self) -> int:
        return self.block_pool.num_blocks

    @property
    def num_free_blocks(self) -> int:
        return self.block_pool.num_free_blocks

    @property
    def num_used_blocks(self) -> int:
        return self.block_pool.num_blocks - self.block_pool.num_free_blocks

    @property
    def usage(self) -> float:
        return self.block_pool.usage

    def find_cached_prefix(self, block_hashes: Sequence[int], max_blocks: int) -> list[KVBlock]:
        if not self.enable_prefix_caching:
            return []
        queried = block_hashes[: max(max_blocks, 0)]
        hits = []
        for block_hash in queried:
            block = self.block_pool.lookup(block_hash)
            if block is None:
                break
            hits.append(block)
        self.prefix_cache_stats.queries += len(queried)
        self.prefix_cache_stats.hits += len(hits)
        return hits

    def allocate_slots(
        self, request_id: str, num_tokens: int, cached_prefix: Sequence[KVBlock] = ()
    ) -> bool:
        if num_tokens < 0:
            raise ValueError(f"num_tokens must be >= 0, got {num_tokens}")
        owned = self._blocks.get(request_id)
        if owned is not None and cached_prefix:
            raise ValueError(
                f"request {request_id!r} already owns blocks; "
                "a cached prefix is only accepted on its first call"
            )
        num_required = -(-num_tokens // self.block_size)
        num_new = num_required - len(owned if owned is not None else cached_prefix)
        if num_new < 0 and owned is None:
            raise ValueError(
                f"cached prefix of {len(cached_prefix)} blocks is longer than {num_tokens} tokens"
            )
        for block in cached_prefix:
            # NOTE: an allocation between find_cached_prefix and here may have evicted a free
            # cached block and handed it out with other contents; sharing it would corrupt KV.
            if block.block_hash is None or self.block_pool.lookup(block.block_hash) is not block:
                raise ValueError(f"cached block {block.block_id} was evicted since it was found")
        # NOTE: touching a free cached block takes it out of the free queue, so those blocks are
        # not available for the new ones.
        num_revived = len({block for block in cached_prefix if block.ref_count == 0})
        if max(num_new, 0) > self.block_pool.num_free_blocks - num_revived:
            return False
        if owned is None:
            self.block_pool.touch(cached_prefix)
            owned = self._blocks[request_id] = list(cached_prefix)
            self._num_cached[request_id] = len(cached_prefix)
        if num_new > 0:
            owned.extend(self.block_pool.allocate(num_new))
        return True

    def cache_full_blocks(
        self, request_id: str, block_hashes: Sequence[int], num_computed_tokens: int
    ) -> None:
        if not self.enable_prefix_caching:
            return
        owned = self._blocks[request_id]
        if num_computed_tokens > len(owned) * self.block_size:
            raise ValueError(
                f"request {request_id!r} computed {num_computed_tokens} tokens "
                f"but owns slots for {len(owned) * self.block_size}"
            )
        num_full = min(len(block_hashes), num_computed_tokens // self.block_size)
        for index in range(self._num_cached[request_id], num_full):
            self.block_pool.cache_block(owned[index], block_hashes[index])
        self._num_cached[request_id] = max(self._num_cached[request_id], num_full)

    def free(self, request_id: str) -> None:
        owned = self._blocks.pop(request_id, None)
        if owned is None:
            return
        del self._num_cached[request_id]
        # NOTE: reverse order puts a prefix's last block nearest the LRU head, so eviction eats
        # a cached chain from its tail and the shared head of the prefix survives longest.
        self.block_pool.free(reversed(owned))

    def block_ids(self, request_id: str) -> list[int]:
        return [block.block_id for block in self._blocks.get(request_id, ())]

    def num_request_blocks(self, request_id: str) -> int:
        return len(self._blocks.get(request_id, ()))
