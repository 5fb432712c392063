"""Capacity: the highest load at which streams stay viable and the first audio comes quickly."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class CapacityCriteria:
    """A load level passes when at least `min_viable_pct` % of its streams never underrun, its
    p95 time to first audio is at most `max_ttfa_p95_s`, and, for a level of clients (a summary
    with `held_pct`), it held at least `min_held_pct` % of its nominal load through its measured
    window: a level that held less was not measured at its load, so it cannot show capacity there."""

    min_viable_pct: float = 99.0
    max_ttfa_p95_s: float = 1.0
    min_held_pct: float = 95.0

    def __post_init__(self) -> None:
        if not 0.0 < self.min_viable_pct <= 100.0:
            raise ValueError(f"min_viable_pct must be in (0, 100], got {self.min_viable_pct}")
        if not self.max_ttfa_p95_s > 0:
            raise ValueError(f"max_ttfa_p95_s must be > 0, got {self.max_ttfa_p95_s}")
        if not 0.0 < self.min_held_pct <= 100.0:
            raise ValueError(f"min_held_pct must be in (0, 100], got {self.min_held_pct}")

    def held(self, summary: dict) -> bool:
        """Whether the level held its load (a summary without `held_pct` has no clients to hold it)."""
        held = summary.get("held_pct")
        return held is None or held >= self.min_held_pct

    def passes(self, summary: dict) -> bool:
        viable, ttfa = summary.get("viable_pct"), summary.get("ttfa_p95")
        return (viable is not None and ttfa is not None
                and viable >= self.min_viable_pct and ttfa <= self.max_ttfa_p95_s and self.held(summary))


def capacity(points: list[tuple[float, dict]], criteria: CapacityCriteria) -> float:
    """The largest load such that it and every lower measured load pass; 0 when the lowest fails.

    `points` are (load, summary) pairs in any order. A pass above a failure is not counted: it is
    noise, not capacity.
    """
    best = 0.0
    for load, summary in sorted(points, key=lambda point: point[0]):
        if not criteria.passes(summary):
            break
        best = load
    return best
