"""The per-stream state pool: one slot per stream, every slot back when its stream ends."""
from __future__ import annotations

import pytest
import torch

from memory.state_slots import NoFreeSlot, StateSlotPool

SHAPES = [((2, 3), torch.float32), ((4,), torch.int64)]


def test_bytes_per_slot_counts_every_state_tensor():
    assert StateSlotPool.bytes_per_slot(SHAPES) == 2 * 3 * 4 + 4 * 8


def test_a_slot_belongs_to_one_stream_and_returns_when_released():
    pool = StateSlotPool(SHAPES, num_slots=2)
    first, second = pool.allocate("a"), pool.allocate("b")
    assert {first, second} == {0, 1} and pool.num_free == 0
    with pytest.raises(NoFreeSlot):
        pool.allocate("c")
    with pytest.raises(ValueError):
        pool.allocate("a")
    pool.release("a")
    pool.release("a")  # twice: no-op
    assert pool.num_free == 1 and "a" not in pool and pool.allocate("c") == first


def test_gather_and_scatter_move_each_streams_rows_only():
    pool = StateSlotPool(SHAPES, num_slots=3)
    for owner in "abc":
        pool.allocate(owner)
    slots = pool.slots_of(["c", "a"])
    states = pool.gather(slots)
    assert [tuple(s.shape) for s in states] == [(2, 2, 3), (2, 4)]
    pool.scatter(slots, [torch.full((2, 2, 3), 7.0), torch.arange(8).view(2, 4)])
    b = pool.gather(pool.slots_of(["b"]))
    assert b[0].abs().sum() == 0 and b[1].abs().sum() == 0
    c, a = pool.gather(slots)[1]
    assert c.tolist() == [0, 1, 2, 3] and a.tolist() == [4, 5, 6, 7]


def test_a_reused_slot_starts_from_zero_state():
    pool = StateSlotPool(SHAPES, num_slots=1)
    slots = torch.tensor([pool.allocate("a")])
    pool.scatter(slots, [torch.ones(1, 2, 3), torch.ones(1, 4, dtype=torch.int64)])
    pool.release("a")
    pool.allocate("b")
    assert all(t.abs().sum() == 0 for t in pool.gather(pool.slots_of(["b"])))
