"""How much longer than predicted the next k engine steps may take, at their usual worst.

One step in ten may take 1.6 times its predicted time on a shared CPU (a codec window longer
than most, a neighbour's burst), but ten steps in a row rarely all do: the tail of their sum
grows far slower than k times one step's excess. Projections over a stream's remaining steps
(capacity/projection.py) charge this curve once, on top of the predicted steps, rather than
charging every step at its own tail: at 16 streams on the 2-core machine that made the engine
plan as if it ran 1.6 times slower than it did, and admission turned away streams it could
serve in real time.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import accumulate
from typing import Sequence

# The runs of consecutive steps measured (up to a quarter of the 256 ratios kept). Past the
# longest, the curve goes on at its last slope: the tail of a sum grows ever slower, so that
# overstates it, on the safe side, for streams hundreds of steps from their end (with the
# curve flat past 64 steps, two of three runs of 64 closed-loop streams had 0.8 and 3.4 % of
# their admitted streams stall at a 200 ms client buffer).
HORIZONS = (1, 2, 4, 8, 16, 32, 64)


@dataclass(frozen=True, slots=True)
class Overrun:
    """Seconds (or predicted steps) by which the next k steps may run over their predicted total:
    piecewise linear through `points` (k, overrun) from (0, 0), on at the last segment's slope.
    Invariant: concave and non-decreasing in k (so a projection's gain, audio made minus time
    taken, stays convex in k), and never negative."""

    points: tuple[tuple[int, float], ...] = ()

    def __post_init__(self) -> None:
        steps = [at for at, _ in self.points]
        if any(at < 1 for at in steps) or steps != sorted(set(steps)) or any(v < 0 for _, v in self.points):
            raise ValueError(f"overrun points need distinct steps >= 1 in order and values >= 0, got {self.points}")

    def __call__(self, k: float) -> float:
        previous_k, previous = 0, 0.0
        for at, value in self.points:
            if k <= at or at == self.points[-1][0]:
                return previous + (value - previous) * max(0.0, k - previous_k) / (at - previous_k)
            previous_k, previous = at, value
        return 0.0

    @property
    def bends(self) -> tuple[int, ...]:
        return tuple(at for at, _ in self.points)

    def scaled(self, factor: float) -> Overrun:
        """The same curve in other units (predicted steps × seconds a step = seconds)."""
        return Overrun(tuple((at, value * factor) for at, value in self.points))


NO_OVERRUN = Overrun()


def nearest_rank(values: Sequence[float], q: float) -> float:
    """The nearest-rank `q` quantile of `values` (not empty): the smallest value with at least
    a share q of them at or below it."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]


def measured_overrun(ratios: Sequence[float], quantile: float) -> Overrun:
    """From recent steps' observed ÷ predicted times, in order: for each horizon k the `quantile`
    of how far the ratios of k consecutive steps sum above k (in predicted steps), taken
    non-decreasing in k and then lifted to the least concave curve above them."""
    # NOTE: every run's sum as a difference of prefix sums: the engine recomputes this every few
    # steps, and a sliding window's loop over 256 ratios for seven horizons took 150 us.
    prefix = list(accumulate(ratios, initial=0.0))
    raw: list[tuple[int, float]] = []
    highest = 0.0
    for k in HORIZONS:
        if k > len(ratios):
            break
        sums = [after - before for before, after in zip(prefix, prefix[k:])]
        highest = max(highest, nearest_rank(sums, quantile) - k)
        raw.append((k, highest))
    return Overrun(tuple(_concave_majorant(raw)))


def _concave_majorant(points: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """The corners of the least concave function through (0, 0) at or above `points` (sorted by
    k, values non-decreasing): the upper convex hull, without the origin."""
    hull: list[tuple[float, float]] = [(0, 0.0)]
    for point in points:
        # NOTE: the middle point goes when it lies on or below the chord from its neighbours.
        while len(hull) >= 2 and _turn(hull[-2], hull[-1], point) >= 0:
            hull.pop()
        hull.append(point)
    return hull[1:]


def _turn(o: tuple[float, float], a: tuple[float, float], b: tuple[float, float]) -> float:
    """Positive when o → a → b turns left (a lies below the chord o → b)."""
    return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])
