"""Fixed-size per-stream state held for a stream's whole life: a streaming codec's convolution
histories and sliding-window keys and values (the "state" of the KV/state cache).

Unlike the LM's KV, such state does not grow with the stream: each stream needs exactly one slot
of a fixed shape, so the pool is a slot allocator (paging would add block tables and buy
nothing). Every state tensor i is one preallocated [num_slots, *shape_i] tensor; a batch of
streams reads its rows by slot index and writes them back the same way.
"""
from __future__ import annotations

from collections.abc import Hashable, Sequence

import torch
from torch import Tensor

StateShape = tuple[tuple[int, ...], torch.dtype]


class NoFreeSlot(RuntimeError):
    """Every slot is owned: the caller must wait for a stream to end (admission prevents this)."""


class StateSlotPool:
    """Invariants: a slot is either free or owned by exactly one stream; `release` returns it (and
    a released slot's rows are zeroed when it is next allocated, the state of a stream that has
    not begun); `num_free + len(owned) == num_slots`."""

    def __init__(self, shapes: Sequence[StateShape], num_slots: int, device: torch.device | str = "cpu") -> None:
        if num_slots < 1:
            raise ValueError(f"a state pool needs at least one slot, got {num_slots}")
        self.shapes = list(shapes)
        self.tensors = [torch.zeros((num_slots, *shape), dtype=dtype, device=device) for shape, dtype in self.shapes]
        # Lowest slot first: a lightly loaded server touches few rows.
        self._free = list(range(num_slots - 1, -1, -1))
        self._owner_slot: dict[Hashable, int] = {}

    @staticmethod
    def bytes_per_slot(shapes: Sequence[StateShape]) -> int:
        return sum(torch.Size(shape).numel() * torch.empty((), dtype=dtype).element_size() for shape, dtype in shapes)

    @property
    def num_slots(self) -> int:
        return self.tensors[0].shape[0] if self.tensors else 0

    @property
    def num_free(self) -> int:
        return len(self._free)

    def __contains__(self, owner: Hashable) -> bool:
        return owner in self._owner_slot

    def allocate(self, owner: Hashable) -> int:
        if owner in self._owner_slot:
            raise ValueError(f"{owner!r} already owns slot {self._owner_slot[owner]}")
        if not self._free:
            raise NoFreeSlot(f"all {self.num_slots} state slots are in use")
        slot = self._free.pop()
        for tensor in self.tensors:
            tensor[slot].zero_()
        self._owner_slot[owner] = slot
        return slot

    def fill(self, owner: Hashable, states: Sequence[Tensor]) -> None:
        """Writes one stream's state (a tensor per state tensor, unbatched) into the owner's slot:
        a stream that starts from where another decode left off, not from zeros."""
        slot = self._owner_slot[owner]
        for tensor, state in zip(self.tensors, states, strict=True):
            tensor[slot].copy_(state)

    def release(self, owner: Hashable) -> None:
        """Returns the owner's slot; an owner without one: no-op."""
        slot = self._owner_slot.pop(owner, None)
        if slot is not None:
            self._free.append(slot)

    def slots_of(self, owners: Sequence[Hashable]) -> Tensor:
        return torch.tensor([self._owner_slot[owner] for owner in owners], device=self.tensors[0].device)

    def gather(self, slots: Tensor) -> list[Tensor]:
        """Every state tensor's rows of `slots`, batched [B, *shape] (copies)."""
        return [tensor.index_select(0, slots) for tensor in self.tensors]

    def scatter(self, slots: Tensor, states: Sequence[Tensor]) -> None:
        """Writes each batched state [B, *shape] back to the rows of `slots`."""
        for tensor, state in zip(self.tensors, states):
            tensor.index_copy_(0, slots, state.to(tensor.dtype))
