"""Refusing a speech before its prompt is prepared: only when the engine has no room for it."""
from __future__ import annotations

import time
from contextlib import contextmanager

import pytest

from api.speech import early_refusal
from api.speech.early_refusal import FLOOD_HOLD_SECONDS, FLOOD_REFUSALS, FLOOD_SECONDS, EarlyRefusal
from capacity.room import Room
from engine.errors import RequestRejected
from engine.outputs import EngineStats


class Speech:
    """What the gate needs of a synthesis: callbacks run when it closes."""

    def __init__(self) -> None:
        self.on_close: list = []

    def close(self) -> None:
        for callback in self.on_close:
            callback()


@contextmanager
def starting(gate: EarlyRefusal, speech: Speech):
    """`speech` counted as starting (unchecked, as a continuation is) while the body runs, and
    admitted when it completes."""
    with gate.claim(None) as admitted:
        yield
        admitted(speech)


def busy_gate() -> EarlyRefusal:
    """A gate with one speech of its own in flight (the engine is not idle)."""
    gate = EarlyRefusal(admission_on=True)
    with starting(gate, Speech()):
        pass
    return gate


def stats(running: int, room: int, queued: int = 0, wait: float = 2.5, taken_at: float | None = None,
          room_now: int | None = None) -> EngineStats:
    """A report with `room` speeches that would start in time (`room_now` of them at once: all
    unless told)."""
    now = room if room_now is None else room_now
    room = Room(now, room, 0.0 if now else wait, time.monotonic() if taken_at is None else taken_at)
    return EngineStats(num_running=running, num_queued=queued, room=room)


def test_room_passes_and_a_full_engine_refuses_with_its_projected_wait():
    gate = busy_gate()
    gate.check(stats(running=3, room=1))
    with pytest.raises(RequestRejected) as info:
        gate.check(stats(running=3, room=0))
    assert info.value.code == "overloaded" and info.value.retry_after == 2.5
    assert gate.refused == 1


def test_a_speech_that_would_wait_in_the_queue_is_not_refused_here():
    """No room now, but the engine would start one more by its deadline after a wait: the gate
    lets it through to be prepared (the engine queues it); a second one finds that room taken."""
    gate = busy_gate()
    report = stats(running=6, room=1, room_now=0, wait=0.4)
    assert gate.room_left(report) == 1
    gate.check(report)
    with starting(gate, Speech()):
        with pytest.raises(RequestRejected) as info:
            gate.check(report)
    assert info.value.retry_after == 0.4


def test_with_no_speech_of_its_own_in_flight_a_stale_full_report_refuses_nothing():
    """A client that sends its next request the moment its last one ends: the report (up to a
    quarter of a second old) still shows that stream and no room; the engine is idle."""
    gate = EarlyRefusal(admission_on=True)
    speech = Speech()
    with starting(gate, speech):
        pass
    report = stats(running=1, room=0, taken_at=time.monotonic() - 0.2)
    with pytest.raises(RequestRejected):
        gate.check(report)
    speech.close()
    gate.check(report)


def test_speeches_being_started_or_admitted_since_the_report_take_its_room():
    gate = EarlyRefusal(admission_on=True)
    report = stats(running=2, room=2)
    with starting(gate, Speech()), starting(gate, Speech()):
        with pytest.raises(RequestRejected):
            gate.check(report)
    with pytest.raises(RequestRejected):  # both admitted after the report was taken
        gate.check(report)
    gate.check(stats(running=4, room=1))  # a newer report: the room it names is free


def test_a_speech_the_engine_refused_takes_no_room():
    gate = busy_gate()
    report = stats(running=1, room=1)
    with pytest.raises(ValueError), starting(gate, Speech()):
        raise ValueError("refused by the engine")
    gate.check(report)


def test_an_idle_engine_or_admission_off_never_refuses():
    EarlyRefusal(admission_on=True).check(stats(running=0, room=0))
    EarlyRefusal(admission_on=False).check(stats(running=50, room=0, queued=9))


def test_the_gate_counts_the_room_for_short_speeches():
    """No room in time for another speech of the usual size, but for short ones: the gate lets
    one through to be prepared (the engine decides with its prompt in hand)."""
    gate = busy_gate()
    usual_full = stats(running=6, room=0, room_now=0)
    gate.check(EngineStats(num_running=6, room=Room(0, 0, 1.0, usual_full.room.taken_at, short_in_time=1)))
    with pytest.raises(RequestRejected):
        gate.check(usual_full)  # a report without the short figure: the usual size's


def test_speeches_arriving_together_cannot_all_pass_on_one_room():
    """The check and the claim are one: a speech that passed counts as starting while it is
    planned and prepared (which yields to the event loop), so the next arrival finds the room
    taken and is refused at once, not after its own preparation."""
    gate = busy_gate()
    report = stats(running=2, room=1)
    with gate.claim(report) as admitted:
        with pytest.raises(RequestRejected):
            with gate.claim(report):
                pass
        assert gate.starting == 1
        admitted(Speech())
    assert (gate.starting, gate.active) == (0, 2)


def test_a_claim_whose_body_fails_or_never_admits_takes_no_room():
    gate = busy_gate()
    report = stats(running=1, room=1)
    with pytest.raises(ValueError), gate.claim(report):
        raise ValueError("the planner refused the text")
    with gate.claim(report):
        pass  # prepared, then refused by the engine: never admitted
    gate.check(report)
    assert (gate.starting, gate.active) == (0, 1)


def test_while_it_refuses_a_flood_it_lets_nothing_in_and_then_reopens(monkeypatch):
    """Requests read late in a burst would take room the engine reports meanwhile: while the
    gate refuses FLOOD_REFUSALS within FLOOD_SECONDS it refuses whatever the room, and once the
    refusals stop it lets speeches in on the room again."""
    clock = [100.0]
    monkeypatch.setattr(early_refusal.time, "monotonic", lambda: clock[0])
    gate = busy_gate()
    full, roomy = stats(running=8, room=0), stats(running=8, room=3)
    for _ in range(FLOOD_REFUSALS - 1):
        with pytest.raises(RequestRejected):
            gate.check(full)
    gate.check(roomy)  # seven refusals: not a flood yet
    with pytest.raises(RequestRejected):
        gate.check(full)
    with pytest.raises(RequestRejected, match="many requests came at once"):
        gate.check(roomy)
    clock[0] += FLOOD_SECONDS
    gate.check(roomy)  # the refusals have stopped for a while
    assert gate.refused == FLOOD_REFUSALS + 1


def test_a_flood_does_not_refuse_the_first_speech_of_an_idle_api():
    gate = EarlyRefusal(admission_on=True)
    for _ in range(FLOOD_REFUSALS):
        gate._refusals.append(time.monotonic())
    gate.check(stats(running=0, room=1))


def test_a_flood_that_goes_on_past_its_hold_is_served_on_the_room_again(monkeypatch):
    """Refusals that go on for longer than a burst takes to read are a sustained overload: its
    room is served (clients at twice the capacity, refused all along, made half the audio)."""
    clock = [100.0]
    monkeypatch.setattr(early_refusal.time, "monotonic", lambda: clock[0])
    gate = busy_gate()
    full, roomy = stats(running=8, room=0), stats(running=8, room=3)
    while clock[0] < 100.08 + FLOOD_HOLD_SECONDS:  # the flood began with the 8th refusal, at 100.07
        with pytest.raises(RequestRejected):
            gate.check(full if clock[0] < 100.1 else roomy)
        clock[0] += 0.01
    gate.check(roomy)
