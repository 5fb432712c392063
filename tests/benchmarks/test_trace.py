from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.capacity import CapacityCriteria, capacity
from benchmarks.trace import RequestTrace, is_viable, percentile, summarize, underrun_seconds

RATE = 1000  # samples per second: 100 samples = 0.1 s of audio keeps the arithmetic readable


def trace(sent: float, chunks: list[tuple[float, int]], ok: bool = True) -> RequestTrace:
    return RequestTrace(sent=sent, sample_rate=RATE, chunks=list(chunks), ok=ok)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=40),
    st.floats(0, 100),
)
def test_percentile_matches_numpy_linear(values, q):
    assert percentile(values, q) == pytest.approx(np.percentile(values, q, method="linear"), abs=1e-6)


def test_percentile_known_values():
    assert percentile([4.0, 1.0, 3.0, 2.0], 50) == 2.5
    assert percentile([1.0, 2.0, 3.0, 4.0, 5.0], 95) == pytest.approx(4.8)
    assert percentile([7.0], 99) == 7.0
    with pytest.raises(ValueError):
        percentile([], 50)
    with pytest.raises(ValueError):
        percentile([1.0], 101)


def test_ttfa_skips_empty_chunks_and_audio_seconds_sums_samples():
    t = trace(10.0, [(10.2, 0), (10.5, 240), (10.9, 760)])
    assert t.ttfa == pytest.approx(0.5)
    assert t.audio_seconds == pytest.approx(1.0)
    assert t.finished_at == 10.9
    assert t.rtf == pytest.approx(0.9)


def test_stream_arriving_ahead_of_playback_never_underruns():
    # Each 0.1 s chunk arrives 0.05 s after the previous: always ahead of the playhead.
    t = trace(0.0, [(0.3 + 0.05 * i, 100) for i in range(10)])
    assert underrun_seconds(t) == 0.0
    assert is_viable(t)


def test_exactly_on_time_chunks_are_not_underruns():
    # Chunk i is due at 0.5 + 0.1 i and arrives exactly then.
    t = trace(0.0, [(0.5 + 0.1 * i, 100) for i in range(8)])
    assert underrun_seconds(t) == 0.0


def test_late_chunk_stalls_and_shifts_the_rest_of_playback():
    # Playback starts at 1.0; chunk 2 is due at 1.1 but arrives 1.4 (0.3 s stall); playback then
    # resumes at 1.4, so chunk 3 is due at 1.5 and arrives 1.6 (0.1 s more); chunk 4 is due at 1.7
    # and arrives 1.65 (on time).
    t = trace(0.0, [(1.0, 100), (1.4, 100), (1.6, 100), (1.65, 100)])
    assert underrun_seconds(t) == pytest.approx(0.4)
    assert not is_viable(t)


def test_client_buffer_absorbs_a_stall_shorter_than_the_buffer():
    t = trace(0.0, [(1.0, 100), (1.4, 100), (1.6, 100), (1.65, 100)])
    # With 0.25 s of buffer playback starts at 1.25: chunk 2 due 1.35, late by 0.05; then due 1.5,
    # arrives 1.6, late by 0.1; chunk 4 due 1.7, on time.
    assert underrun_seconds(t, client_buffer_s=0.25) == pytest.approx(0.15)
    # 0.4 s covers both.
    assert underrun_seconds(t, client_buffer_s=0.4) == 0.0
    assert is_viable(t, client_buffer_s=0.4)


def test_failed_or_silent_requests_are_not_viable():
    assert not is_viable(trace(0.0, [(0.2, 100)], ok=False))
    assert not is_viable(trace(0.0, []))
    assert underrun_seconds(trace(0.0, [])) == 0.0


def test_summarize_known_run():
    traces = [
        trace(0.0, [(0.1, 100), (0.15, 100)]),  # ttfa 0.1, viable, rtf 0.75
        trace(0.0, [(0.2, 100), (0.5, 100)]),  # ttfa 0.2, stalls 0.2 s, rtf 2.5
        trace(1.0, [(1.3, 200)]),  # ttfa 0.3, viable, rtf 1.5
        trace(1.0, [], ok=False),
    ]
    s = summarize(traces, wall_seconds=2.0)
    assert s["requests"] == 4
    assert s["failed"] == 1
    assert s["ttfa_p50"] == pytest.approx(0.2)
    assert s["ttfa_p95"] == pytest.approx(0.29)
    assert s["ttfa_p99"] == pytest.approx(0.298)
    assert s["viable_pct"] == pytest.approx(50.0)
    assert s["underrun_s_total"] == pytest.approx(0.2)
    assert s["audio_s_per_wall_s"] == pytest.approx(0.3)
    assert s["rtf_p50"] == pytest.approx(1.5)
    assert s["rtf_p95"] == pytest.approx(2.4)
    assert summarize(traces, wall_seconds=2.0, client_buffer_s=0.2)["viable_pct"] == pytest.approx(75.0)


def test_summarize_of_only_failures_has_no_percentiles():
    s = summarize([trace(0.0, [], ok=False)], wall_seconds=1.0)
    assert s["ttfa_p95"] is None and s["rtf_p50"] is None
    assert s["viable_pct"] == 0.0


def level(viable_pct: float | None, ttfa_p95: float | None) -> dict:
    return {"viable_pct": viable_pct, "ttfa_p95": ttfa_p95}


def test_capacity_is_the_highest_load_before_the_first_miss():
    criteria = CapacityCriteria(min_viable_pct=99.0, max_ttfa_p95_s=1.0)
    points = [
        (8, level(99.5, 0.4)),
        (1, level(100.0, 0.1)),
        (4, level(100.0, 0.2)),
        (16, level(98.9, 0.5)),  # viability just under the bound
        (32, level(100.0, 0.6)),  # a pass above a miss is noise, not capacity
    ]
    assert capacity(points, criteria) == 8
    assert capacity([(1, level(100.0, 1.2)), (2, level(100.0, 0.5))], criteria) == 0
    assert capacity([(1, level(100.0, 1.0)), (2, level(99.0, 0.9))], criteria) == 2  # bounds are inclusive
    assert capacity([(1, level(None, None))], criteria) == 0
    assert capacity([], criteria) == 0


def test_capacity_from_constructed_traces():
    # One level of four streams, one of which stalls; one level where all four are on time.
    on_time = [trace(0.0, [(0.2, 100), (0.25, 100)]) for _ in range(4)]
    one_stalls = on_time[:3] + [trace(0.0, [(0.2, 100), (0.5, 100)])]
    criteria = CapacityCriteria(min_viable_pct=99.0, max_ttfa_p95_s=0.5)
    points = [(2, summarize(on_time, 1.0)), (4, summarize(one_stalls, 1.0))]
    assert capacity(points, criteria) == 2
    relaxed = CapacityCriteria(min_viable_pct=75.0, max_ttfa_p95_s=0.5)
    assert capacity(points, relaxed) == 4
