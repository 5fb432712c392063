"""Refusing a new speech before its prompt is prepared, when the engine has no room for it.

The engine's admission decides with the prepared prompt in hand (capacity/admission.py), but
preparing a prompt costs tens of milliseconds of CPU: under heavy overload, preparing requests
only for the engine to refuse them took a whole core from the streams it serves (64 closed-loop
streams on the 2-core machine: 87 % refused, and only 54 % of the admitted streams viable), and
in a burst the last refusals came only after everyone's prompt had been prepared (p99 0.76 s).
So the API first compares the room the engine last reported (how many short requests would start
by their first audio's due time, at once or after waiting in its queue: the `Room` it publishes,
capacity/room.py) with what this API has started since.

While it refuses a flood (FLOOD_REFUSALS within FLOOD_SECONDS), it lets nothing in: many clients
came at once, and the server reads their requests only as fast as its other work lets it (a
burst of 128 after a loaded minute was read over 0.8 s, each request looked at within a
millisecond of being read). Room the engine reports meanwhile went to whoever was read next,
report after report: 41-56 of 128 were let in, with first audio at p95 0.87-1.77 s and the last
refusals as late, where a burst on an idle server let in 8. Steady loads never refuse that fast
(32 closed-loop clients at capacity: 0.2-0.7 % of 20 requests a second); overloads that go on do,
and past a flood's first FLOOD_HOLD_SECONDS their room is served again.

Short, not of the usual size: the usual size is a mean, which a few long speeches (paragraphs,
and a speech's first request counts its later segments too) pull far above most requests. Gated
on it, the API refused 1-3 % of 48 paced listeners' requests while the engine, deciding with the
prompt in hand, refused none of those it was given. Against short requests the gate still shuts
when the engine is full for anyone, which is when it saves the most CPU; a long speech it lets
through is the engine's to admit, queue or refuse.
"""
from __future__ import annotations

import time
from collections import deque
from contextlib import contextmanager
from typing import Callable, Iterator

from api.speech.synthesis import SegmentedSynthesis
from capacity.room import room_left
from engine.errors import RequestRejected
from engine.outputs import EngineStats

# A flood: this many refusals within this many seconds (a report's room, refused in a quarter of
# a second; the steady levels refuse at most a few a second).
FLOOD_REFUSALS = 8
FLOOD_SECONDS = 0.25
# A flood's first this many seconds: a burst's requests are read within it; beyond it, refusals
# that go on are a sustained overload, whose room must be served (closed-loop clients at twice
# the capacity, refused all along, made half the audio they made on the room).
FLOOD_HOLD_SECONDS = 1.0


class EarlyRefusal:
    """Invariant: a speech is refused here only while admission is on, this API has a speech in
    flight (the engine, which serves this API alone, is not idle), and either it is within
    FLOOD_HOLD_SECONDS of the start of a flood (FLOOD_REFUSALS refusals within FLOOD_SECONDS,
    and as many since), or the speeches being started by this API plus those admitted since the
    engine's last report already fill the room it reported for short speeches that would start
    by their first-audio deadline, waiting in its queue if need be (a speech it would queue
    rather than refuse goes on to be prepared);
    `starting` counts the speeches between this check and the engine's answer to their first
    segment, `active` those admitted and not yet closed."""

    def __init__(self, admission_on: bool) -> None:
        self.admission_on = admission_on
        self.starting = 0
        self.active = 0
        self.refused = 0  # since the server started
        self._admitted: deque[float] = deque(maxlen=256)  # when speeches were admitted (monotonic)
        self._refusals: deque[float] = deque(maxlen=FLOOD_REFUSALS)  # when the last ones were refused
        self._flood_began: float | None = None

    def room_left(self, stats: EngineStats) -> int:
        """How many more short speeches would start by their first audio's due time, at once or
        after waiting (0: this API refuses): the engine's published room in time less what this
        API started since (what the Ray router compares, too)."""
        taken = self.starting + sum(1 for at in self._admitted if at >= stats.room.taken_at)
        # NOTE: the report may be a quarter of a second old: a client that sends its next request
        # the moment its last one ends must not be refused for a stream that is gone.
        if not self.admission_on or self.starting + self.active == 0 or \
                stats.num_running + stats.num_queued + taken == 0:
            return max(1, room_left(stats.room.in_time_for_short, taken))
        return room_left(stats.room.in_time_for_short, taken)

    def check(self, stats: EngineStats) -> None:
        """Raises RequestRejected ("overloaded", with the engine's projected wait) when full or
        in a flood."""
        self.check_flood(stats)
        if self.room_left(stats) <= 0:
            self._refuse(stats, "the engine has no room for another stream")

    def check_flood(self, stats: EngineStats) -> None:
        """Raises RequestRejected within a flood's hold (what api/http/flood_door.py asks before a
        request's body is read: a flood's refusals need nothing of it)."""
        if self._in_flood(time.monotonic()) and self.admission_on and self.starting + self.active:
            self._refuse(stats, "many requests came at once")

    def _refuse(self, stats: EngineStats, why: str) -> None:
        self.refused += 1
        self._refusals.append(time.monotonic())
        raise RequestRejected(
            f"{why} ({stats.num_running} running, {self.starting} starting); retry in {stats.room.seconds_until:.1f} s",
            "overloaded", stats.room.seconds_until,
        )

    def _in_flood(self, now: float) -> bool:
        """Whether this is within FLOOD_HOLD_SECONDS of the start of a flood that goes on."""
        if not (len(self._refusals) == FLOOD_REFUSALS and now - self._refusals[0] < FLOOD_SECONDS):
            self._flood_began = None
            return False
        if self._flood_began is None:
            self._flood_began = now
        return now - self._flood_began < FLOOD_HOLD_SECONDS

    @contextmanager
    def claim(self, stats: EngineStats | None) -> Iterator[Callable[[SegmentedSynthesis], None]]:
        """Checks for room in `stats` (None: a continuation, let through unchecked) and counts
        the speech as starting from that check until the body ends, so that speeches arriving
        together cannot all pass on room that only one of them will get: the body (planning,
        preparation, the engine's answer) yields to the event loop. The body calls what it is
        given with its synthesis once the engine has admitted it, which counts it as active until
        it closes; a body that raises, or never calls it, takes no room."""
        if stats is not None:
            self.check(stats)
        self.starting += 1
        try:
            yield self._admitted_now
        finally:
            self.starting -= 1

    def _admitted_now(self, synthesis: SegmentedSynthesis) -> None:
        self._admitted.append(time.monotonic())
        self.active += 1
        synthesis.on_close.append(self._ended)

    def _ended(self) -> None:
        self.active -= 1
