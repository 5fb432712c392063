"""Refusing a speech before its prompt is prepared: only when the engine is already full."""
from __future__ import annotations

import pytest

from api.early_refusal import EarlyRefusal
from engine.errors import RequestRejected
from engine.outputs import EngineStats


def stats(running: int, queued: int = 0, capacity: int = 4, room: float = 2.5) -> EngineStats:
    return EngineStats(num_running=running, num_queued=queued, realtime_capacity=capacity, seconds_until_room=room)


def test_room_below_capacity_passes_and_a_full_engine_refuses_with_its_projected_wait():
    gate = EarlyRefusal(admission_on=True)
    gate.check(stats(running=3))
    with pytest.raises(RequestRejected) as info:
        gate.check(stats(running=3, queued=1))
    assert info.value.code == "overloaded" and info.value.retry_after == 2.5
    assert gate.refused == 1


def test_speeches_being_started_count_until_the_engine_answers():
    gate = EarlyRefusal(admission_on=True)
    with gate.start(), gate.start():
        with pytest.raises(RequestRejected):
            gate.check(stats(running=2))
    gate.check(stats(running=2))  # both answered: their streams now show in the engine's count


def test_an_idle_engine_or_admission_off_never_refuses():
    EarlyRefusal(admission_on=True).check(stats(running=0, capacity=0))
    EarlyRefusal(admission_on=False).check(stats(running=50, queued=9, capacity=4))
