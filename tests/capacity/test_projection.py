"""Slack projection: the closed forms agree with stepping the streams one step at a time."""
from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from capacity.overrun import NO_OVERRUN, Overrun, measured_overrun
from capacity.projection import (
    StreamOutlook,
    Timeline,
    advance,
    all_keep_slack,
    lowest_slack,
    realtime_capacity,
    start_delay,
    timeline_of,
)


def linear(a: float, b: float):
    return lambda rows: a + b * rows


def stepped_lowest_slacks(streams, step_seconds, step_audio, extra=0.0, after=0, overrun=NO_OVERRUN) -> list[float]:
    """The reference: run every stream one step at a time and watch each listener (from step
    `after` + 1 on); any run of j steps runs `overrun(j)` over its predicted seconds: a playing
    listener is judged over the run from now, a new one's first audio too, and once it plays,
    over the run from its first audio (which may come on time, and the slow steps after)."""
    lowest = [math.inf] * len(streams)
    starts: dict[int, tuple[int, float]] = {}  # a new listener's first-audio step and predicted time
    predicted = extra
    for k in range(1, max((s.remaining_steps for s in streams), default=0) + 1):
        predicted += step_seconds(sum(1 for s in streams if s.remaining_steps >= k))
        elapsed = predicted + overrun(k)
        for i, s in enumerate(streams):
            if s.remaining_steps < k:
                continue
            if s.is_playing:
                slack = s.ahead + k * step_audio - elapsed
            else:
                if k == min(s.first_audio_steps, s.remaining_steps):
                    starts[i] = (k, predicted)
                    if k > after:
                        lowest[i] = min(lowest[i], s.ahead - elapsed)
                if i not in starts:
                    continue
                first, at_first = starts[i]
                slack = (s.generated_steps + k) * step_audio - (predicted - at_first) - overrun(k - first)
            if k > after:
                lowest[i] = min(lowest[i], slack)
    return lowest


def test_timeline_bends_where_streams_end():
    timeline = Timeline([2, 4], linear(0.0, 0.1), step_audio=0.5, extra_seconds=0.05)
    assert timeline.elapsed(0) == pytest.approx(0.05)
    assert timeline.elapsed(2) == pytest.approx(0.05 + 2 * 0.2)
    assert timeline.elapsed(3) == pytest.approx(0.05 + 0.4 + 0.1)
    assert timeline.elapsed(4) == pytest.approx(0.05 + 0.4 + 0.2)


def test_a_stream_far_ahead_survives_a_slow_patch_and_a_close_one_does_not():
    step = linear(0.0, 0.03)  # 4 streams: 0.12 s per step for 0.1 s of audio each
    close = [StreamOutlook(0.1, 20)] + [StreamOutlook(5.0, 20)] * 3
    far = [StreamOutlook(1.0, 20)] * 4
    assert not all_keep_slack(close, step, 0.1)
    assert all_keep_slack(far, step, 0.1)


def test_a_newcomer_must_have_its_first_audio_by_its_deadline():
    step = linear(0.01, 0.01)
    assert all_keep_slack([StreamOutlook(0.5, 50, first_audio_steps=3)], step, 0.1)
    assert not all_keep_slack([StreamOutlook(0.05, 50, first_audio_steps=3)], step, 0.1)
    # Its prompt's prefill counts against the same deadline.
    assert not all_keep_slack([StreamOutlook(0.5, 50, first_audio_steps=3, prefill_seconds=0.5)], step, 0.1)


def test_a_run_of_steps_is_charged_its_overrun_once():
    overrun = Overrun(((1, 0.05), (8, 0.12)))
    timeline = Timeline([20], linear(0.0, 0.1), step_audio=0.1, overrun=overrun)
    assert timeline.elapsed(1) == pytest.approx(0.1 + 0.05)
    assert timeline.elapsed(20) == pytest.approx(2.0 + 0.12 + 12 * 0.01)  # on at the last slope
    assert timeline.end == timeline.elapsed(20)
    # A stream that keeps exactly to real time loses the overrun of its run of steps, no more.
    assert lowest_slack(StreamOutlook(0.5, 20), timeline) == pytest.approx(0.5 - 0.24)
    # A new one, first audio in 2 steps: on time or not, the 18 steps after may overrun by 0.22.
    assert lowest_slack(StreamOutlook(5.0, 20, first_audio_steps=2), timeline) == pytest.approx(0.2 - 0.22)


def test_every_prompt_still_to_prefill_is_charged_to_the_first_step():
    streams = [StreamOutlook(1.0, 5, prefill_seconds=0.25), StreamOutlook(1.0, 5, 2, prefill_seconds=0.5)]
    assert timeline_of(streams, linear(0.0, 0.1), 0.1).elapsed(1) == pytest.approx(0.75 + 0.2)


outlook = st.builds(
    StreamOutlook,
    ahead=st.floats(-1.0, 3.0),
    remaining_steps=st.integers(0, 40),
    first_audio_steps=st.one_of(st.just(0), st.integers(1, 10)),
    generated_steps=st.integers(0, 5),
)


@settings(max_examples=200, deadline=None)
@given(
    streams=st.lists(outlook, min_size=1, max_size=8),
    a=st.floats(0.0, 0.05),
    b=st.floats(0.0, 0.05),
    step_audio=st.floats(0.01, 0.2),
    extra=st.floats(0.0, 0.3),
    ratios=st.lists(st.floats(0.0, 3.0), max_size=80),
    scale=st.floats(0.0, 0.05),
)
def test_projection_matches_stepping(streams, a, b, step_audio, extra, ratios, scale):
    overrun = measured_overrun(ratios, 0.9).scaled(scale)
    timeline = Timeline([s.remaining_steps for s in streams], linear(a, b), step_audio, extra, overrun)
    expected = stepped_lowest_slacks(streams, linear(a, b), step_audio, extra, overrun=overrun)
    for stream, want in zip(streams, expected):
        assert lowest_slack(stream, timeline) == pytest.approx(want, abs=1e-9)


@settings(max_examples=200, deadline=None)
@given(streams=st.lists(outlook, min_size=1, max_size=6), k=st.integers(1, 39))
def test_advanced_streams_see_the_future_stepping_sees(streams, k):
    step, step_audio = linear(0.01, 0.02), 0.05
    timeline = Timeline([s.remaining_steps for s in streams], step, step_audio)
    later = [advance(s, k, timeline) for s in streams if s.remaining_steps > k]
    expected = [want for s, want in zip(streams, stepped_lowest_slacks(streams, step, step_audio, after=k))
                if s.remaining_steps > k]
    later_timeline = Timeline([s.remaining_steps for s in later], step, step_audio)
    for stream, want in zip(later, expected):
        assert lowest_slack(stream, later_timeline) == pytest.approx(want, abs=1e-9)


def test_start_delay_is_when_enough_streams_have_ended():
    step, step_audio = linear(0.0, 0.01), 0.1
    committed = [StreamOutlook(1.0, 10), StreamOutlook(1.0, 30), StreamOutlook(1.0, 50)]
    timeline = Timeline([10, 30, 50], step, step_audio)

    def room_for(n):
        return lambda running, at: len(running) <= n

    assert start_delay(committed, room_for(3), step, step_audio) == 0.0
    assert start_delay(committed, room_for(1), step, step_audio) == pytest.approx(timeline.elapsed(30))
    assert start_delay(committed, room_for(0), step, step_audio) == pytest.approx(timeline.elapsed(50))
    assert start_delay(committed, lambda running, at: False, step, step_audio) is None


def test_start_delay_passes_the_time_from_now():
    step, step_audio = linear(0.0, 0.01), 0.1
    seen = []
    start_delay([StreamOutlook(1.0, 10)], lambda running, at: seen.append(at) or False, step, step_audio)
    assert seen == [0.0, pytest.approx(0.1)]


@given(a=st.floats(0.0, 0.1), b=st.floats(0.0, 0.01), step_audio=st.floats(0.01, 0.2), cap=st.integers(0, 100))
def test_realtime_capacity_is_the_most_streams_faster_than_real_time(a, b, step_audio, cap):
    step = linear(a, b)
    n = realtime_capacity(step, step_audio, cap)
    assert 0 <= n <= cap
    assert n == 0 or step(n) < step_audio
    assert n == cap or step(n + 1) >= step_audio
