"""Refusing a new speech before its prompt is prepared, when the engine is already full.

The engine's admission decides with the prepared prompt in hand (engine/admission.py), but
preparing a prompt costs tens of milliseconds of CPU: under heavy overload, preparing requests
only for the engine to refuse them took a whole core from the streams it serves (64 closed-loop
streams on the 2-core machine: 87 % refused, and only 54 % of the admitted streams viable). So
the API first compares what is already committed with the capacity the engine last reported.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from engine.errors import RequestRejected
from engine.outputs import EngineStats


class EarlyRefusal:
    """Invariant: a speech is refused here only while admission is on and the streams running,
    queued in the engine and being started by this API already reach the engine's reported
    real-time capacity (at least one: an idle engine always takes a request); `starting` counts
    the speeches between this check and the engine's answer to their first segment."""

    def __init__(self, admission_on: bool) -> None:
        self.admission_on = admission_on
        self.starting = 0
        self.refused = 0  # since the server started

    def check(self, stats: EngineStats) -> None:
        """Raises RequestRejected ("overloaded", with the engine's projected wait) when full."""
        committed = stats.num_running + stats.num_queued + self.starting
        if not self.admission_on or committed < max(1, stats.realtime_capacity):
            return
        self.refused += 1
        raise RequestRejected(
            f"the engine is at its real-time capacity ({committed} streams running or starting); "
            f"retry in {stats.seconds_until_room:.1f} s",
            "overloaded", stats.seconds_until_room,
        )

    @contextmanager
    def start(self) -> Iterator[None]:
        """Counts one speech as starting while the body runs (its first segment's preparation
        and the engine's answer to it)."""
        self.starting += 1
        try:
            yield
        finally:
            self.starting -= 1
