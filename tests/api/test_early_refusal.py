"""Refusing a speech before its prompt is prepared: only when the engine has no room for it."""
from __future__ import annotations

import time

import pytest

from api.early_refusal import EarlyRefusal
from engine.errors import RequestRejected
from engine.outputs import EngineStats


def stats(running: int, room: int, queued: int = 0, wait: float = 2.5, taken_at: float | None = None) -> EngineStats:
    return EngineStats(num_running=running, num_queued=queued, room_streams=room, seconds_until_room=wait,
                       taken_at=time.monotonic() if taken_at is None else taken_at)


def test_room_passes_and_a_full_engine_refuses_with_its_projected_wait():
    gate = EarlyRefusal(admission_on=True)
    gate.check(stats(running=3, room=1))
    with pytest.raises(RequestRejected) as info:
        gate.check(stats(running=3, room=0))
    assert info.value.code == "overloaded" and info.value.retry_after == 2.5
    assert gate.refused == 1


def test_speeches_being_started_or_admitted_since_the_report_take_its_room():
    gate = EarlyRefusal(admission_on=True)
    report = stats(running=2, room=2)
    with gate.start(), gate.start():
        with pytest.raises(RequestRejected):
            gate.check(report)
    with pytest.raises(RequestRejected):  # both admitted after the report was taken
        gate.check(report)
    gate.check(stats(running=4, room=1))  # a newer report: the room it names is free


def test_a_speech_the_engine_refused_takes_no_room():
    gate = EarlyRefusal(admission_on=True)
    report = stats(running=1, room=1)
    with pytest.raises(ValueError), gate.start():
        raise ValueError("refused by the engine")
    gate.check(report)


def test_an_idle_engine_or_admission_off_never_refuses():
    EarlyRefusal(admission_on=True).check(stats(running=0, room=0))
    EarlyRefusal(admission_on=False).check(stats(running=50, room=0, queued=9))
