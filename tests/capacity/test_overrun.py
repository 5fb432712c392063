"""The overrun of a run of steps: measured from observed ÷ predicted step times, concave in k."""
from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from capacity.overrun import HORIZONS, NO_OVERRUN, Overrun, measured_overrun


def scattered(n: int, seed: int = 0) -> list[float]:
    """Steps one in five of which takes twice its prediction (the rest a little under it), in no
    particular order: their mean is 1."""
    rng = random.Random(seed)
    return [2.0 if rng.random() < 0.2 else 0.75 for _ in range(n)]


def test_the_curve_interpolates_its_points_and_goes_on_at_its_last_slope():
    curve = Overrun(((1, 0.5), (4, 1.1)))
    assert curve(0) == 0.0 and curve(-3) == 0.0
    assert curve(1) == pytest.approx(0.5)
    assert curve(2) == pytest.approx(0.7)
    assert curve(4) == pytest.approx(1.1) and curve(400) == pytest.approx(1.1 + 0.2 * 396)
    assert curve.bends == (1, 4)
    assert curve.scaled(2.0)(2) == pytest.approx(1.4)
    assert NO_OVERRUN(50) == 0.0
    for bad in (((0, 0.1),), ((2, 0.1), (1, 0.2)), ((1, 0.1), (1, 0.2)), ((1, -0.1),)):
        with pytest.raises(ValueError):
            Overrun(bad)


def test_steps_that_keep_to_their_prediction_do_not_overrun():
    curve = measured_overrun([1.0] * 256, 0.9)
    assert all(curve(k) == pytest.approx(0.0, abs=1e-9) for k in range(0, 100))


def test_a_run_of_steps_overruns_far_less_than_each_step_at_its_tail():
    ratios = scattered(256)
    curve = measured_overrun(ratios, 0.9)
    assert curve(1) == pytest.approx(1.0)  # the slow step: twice its prediction
    # Charging every one of 64 steps at that tail would add 64 steps; their sum's tail is a few.
    assert curve(64) < 0.2 * 64 * curve(1)


def test_a_lasting_slowdown_overruns_more_than_the_same_steps_scattered():
    """Slow steps that come in runs (a neighbour's burst) add up; the curve sees the order."""
    ratios = scattered(256, seed=1)
    runs = sorted(ratios[:32]) + sorted(ratios[32:64], reverse=True)
    runs = (runs * 4)[:256]
    assert measured_overrun(runs, 0.9)(16) > 1.5 * measured_overrun(ratios, 0.9)(16)


def test_horizons_longer_than_the_steps_seen_are_left_out():
    curve = measured_overrun(scattered(10), 0.9)
    assert max(curve.bends) <= 8 and set(curve.bends) <= set(HORIZONS)
    assert measured_overrun([], 0.9) == NO_OVERRUN


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0.0, 4.0), min_size=1, max_size=300), st.sampled_from([0.5, 0.9, 1.0]))
def test_any_steps_give_a_concave_non_decreasing_curve(ratios, quantile):
    curve = measured_overrun(ratios, quantile)
    values = [curve(k) for k in range(0, 130)]
    assert min(values) >= 0
    steps = [b - a for a, b in zip(values, values[1:])]
    assert all(step >= -1e-9 for step in steps)
    assert all(later <= earlier + 1e-9 for earlier, later in zip(steps, steps[1:]))
    # It lies on or above what it measured: the quantile of k consecutive steps' sums, less k.
    for k in (k for k in HORIZONS if k <= len(ratios)):
        sums = sorted(sum(ratios[i:i + k]) for i in range(len(ratios) - k + 1))
        assert curve(k) >= sums[min(len(sums) - 1, math.ceil(quantile * len(sums)) - 1)] - k - 1e-9


def direct_overrun_points(ratios: list[float], quantile: float) -> list[tuple[int, float]]:
    """measured_overrun's raw points by their definition: every run of k steps summed by itself,
    sorted, its nearest-rank quantile less k, kept non-decreasing in k."""
    points, highest = [], 0.0
    for k in HORIZONS:
        if k > len(ratios):
            break
        sums = sorted(sum(ratios[i:i + k]) for i in range(len(ratios) - k + 1))
        highest = max(highest, sums[min(len(sums) - 1, math.ceil(quantile * len(sums)) - 1)] - k)
        points.append((k, highest))
    return points


@pytest.mark.parametrize("seed", range(5))
def test_the_curve_lies_on_or_above_the_points_of_its_definition(seed):
    rng = random.Random(seed)
    ratios = [rng.lognormvariate(0.0, 0.4) for _ in range(rng.randint(1, 256))]
    curve = measured_overrun(ratios, 0.9)
    points = direct_overrun_points(ratios, 0.9)
    # The least concave curve above the points: through each corner, on or above every point.
    for k, value in points:
        assert curve(k) >= value - 1e-9
    for k, value in curve.points:
        assert value == pytest.approx(dict(points)[k], abs=1e-9)
