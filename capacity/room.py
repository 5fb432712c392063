"""The room the engine publishes, and what is left of it after what was sent since.

The engine takes its room figures a few times a second (they are projections over every
stream); between two reports, the API that starts speeches and the router that sends them to
replicas both count what they sent since the report, and take it off the same figure.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True, frozen=True)
class Room:
    """Room for new requests of the usual size, as the engine saw it at `taken_at` (its clock):
    `now` could start at once, `in_time` would start by their first audio's due time (at once or
    after waiting in the queue), and with no room now, `seconds_until` one could start;
    `short_in_time`: as `in_time`, for short requests (the lower quartile of recent sizes; None:
    not projected, take `in_time`). Invariant: 0 <= now <= in_time <= short_in_time (when set);
    seconds_until is 0 when now > 0."""

    now: int = 0
    in_time: int = 0
    seconds_until: float = 0.0
    taken_at: float = 0.0
    short_in_time: int | None = None

    @property
    def in_time_for_short(self) -> int:
        """Short requests that would start by their first audio's due time."""
        return self.in_time if self.short_in_time is None else self.short_in_time


def room_left(reported: int, taken_since: int) -> int:
    """What is left of `reported` room after `taken_since` requests started (or were sent) since
    the report: never below 0."""
    return max(0, reported - taken_since)
