"""The serving benchmark's figures on constructed traces: admitted vs refused requests, viability
with a client buffer, errors by kind, the capacity rule and the issue's targets."""
from __future__ import annotations

import pytest

from benchmarks.serving_metrics import capacity_point, level_summary, serving_capacity
from benchmarks.serving_report import targets
from benchmarks.trace import RequestTrace

RATE = 1000  # samples per second: 100 samples = 0.1 s of audio


def served(sent: float, chunks: list[tuple[float, int]]) -> RequestTrace:
    return RequestTrace(sent=sent, sample_rate=RATE, chunks=list(chunks))


def refused(sent: float, after: float, retry_after: str | None = "1") -> RequestTrace:
    trace = RequestTrace(sent=sent, sample_rate=RATE)
    trace.refuse(sent + after, retry_after)
    return trace


def failed(sent: float, error: str, chunks: list[tuple[float, int]] = ()) -> RequestTrace:
    trace = served(sent, chunks)
    trace.fail(error)
    return trace


def test_level_summary_keeps_refusals_apart_from_admitted_requests():
    traces = [
        served(0.0, [(0.1, 100), (0.15, 100)]),   # TTFA 0.1, viable at any buffer
        served(0.0, [(0.2, 100), (0.45, 100)]),   # TTFA 0.2, chunk 2 due at 0.3: stalls at 0, viable at 200 ms
        served(1.0, [(1.3, 200)]),                # TTFA 0.3, viable
        failed(1.0, "dropped", [(1.2, 100)]),     # admitted, broke mid-stream: not viable, not in TTFA
        refused(2.0, 0.01),
        refused(2.0, 0.05, retry_after=None),
    ]
    s = level_summary(traces, wall_seconds=2.0)
    assert (s["requests"], s["admitted"]) == (6, 4)
    assert s["refused_pct"] == pytest.approx(100 * 2 / 6)
    assert s["ttfa_p50"] == pytest.approx(0.2)
    assert s["ttfa_p99"] == pytest.approx(0.298)
    assert s["viable_pct_0ms"] == pytest.approx(50.0)
    assert s["viable_pct_200ms"] == pytest.approx(75.0)
    assert s["served_viable_pct_200ms"] == pytest.approx(50.0)
    assert s["audio_s_per_wall_s"] == pytest.approx(0.3)  # 0.6 s of audio from served requests only
    assert s["mean_audio_s"] == pytest.approx(0.2)
    assert s["errors"] == {"5xx": 0, "dropped": 1, "timeout": 0, "other": 0}
    assert s["refusal_p99_s"] == pytest.approx(0.0496)
    assert s["retry_after_pct"] == pytest.approx(50.0)


def test_errors_are_counted_by_kind_and_the_first_cause_is_kept():
    late_cancel = failed(0.0, "dropped")
    late_cancel.fail("timeout")  # the drain cancelled a request whose connection had already broken
    traces = [failed(0.0, "5xx"), failed(0.0, "timeout"), failed(0.0, "http 400"), late_cancel]
    s = level_summary(traces, wall_seconds=1.0)
    assert s["errors"] == {"5xx": 1, "dropped": 1, "timeout": 1, "other": 1}
    assert s["ttfa_p50"] is None and s["viable_pct_200ms"] == 0.0
    assert s["refused_pct"] == 0.0 and s["refusal_p99_s"] is None and s["retry_after_pct"] is None


def test_a_level_of_only_refusals_has_no_admitted_figures():
    s = level_summary([refused(0.0, 0.02), refused(0.0, 0.03)], wall_seconds=1.0)
    assert s["admitted"] == 0 and s["refused_pct"] == 100.0
    assert s["viable_pct_0ms"] is None and s["served_viable_pct_200ms"] == 0.0
    assert s["retry_after_pct"] == 100.0
    with pytest.raises(ValueError):
        level_summary([], wall_seconds=0.0)


def level(load: int, served_viable: float, p95: float | None) -> dict:
    return {"load": load, "served_viable_pct_200ms": served_viable, "ttfa_p95": p95}


def test_capacity_rule_250_ms_p95_and_99_percent_served_viable():
    levels = [level(1, 100.0, 0.08), level(2, 100.0, 0.12), level(4, 99.0, 0.25), level(8, 100.0, 0.26),
              level(16, 100.0, 0.1)]  # 16 passes again, but above a failure: noise, not capacity
    assert serving_capacity(levels) == 4
    assert serving_capacity([level(1, 98.9, 0.05), level(2, 100.0, 0.05)]) == 0
    assert capacity_point(levels[0]) == {"viable_pct": 100.0, "ttfa_p95": 0.08, "held_pct": None}


def test_refusals_count_against_capacity():
    # Every admitted stream is fine, but a tenth of the requests were refused.
    traces = [served(0.0, [(0.05, 100)]) for _ in range(9)] + [refused(0.0, 0.01)]
    summary = level_summary(traces, wall_seconds=1.0) | {"load": 1}
    assert summary["viable_pct_200ms"] == 100.0
    assert serving_capacity([summary]) == 0


def closed(load: int, p95: float, audio: float, viable: float = 100.0) -> dict:
    return {"load": load, "ttfa_p95": p95, "audio_s_per_wall_s": audio, "served_viable_pct_200ms": viable,
            "refused_pct": 0.0}


def burst(errors: dict, viable_200: float, refused_pct: float, retry_pct: float | None,
          refusal_p99: float | None, ttfa_p95: float = 0.2, floor_p99: float | None = 0.03) -> dict:
    return {"errors": errors, "viable_pct_200ms": viable_200, "refused_pct": refused_pct,
            "retry_after_pct": retry_pct, "refusal_p99_s": refusal_p99, "ttfa_p95": ttfa_p95,
            "connection_floor_p99_s": floor_p99}


def report(chorus_levels: list[dict], chorus_cap: float, piper_levels: list[dict], piper_cap: float,
           burst_4x: dict) -> dict:
    no_errors = {"5xx": 0, "dropped": 0, "timeout": 0, "other": 0}
    return {"systems": [
        {"system": "chorus", "closed_loop": chorus_levels, "capacity_streams": chorus_cap,
         "loads": {"burst_multiples": [2.0, 4.0]}, "bursts": [burst(no_errors, 100.0, 0.0, None, None), burst_4x],
         "input_length": [{"format": "pcm", "ratio": 1.1}, {"format": "mp3", "ratio": 3.0}]},
        {"system": "piper", "closed_loop": piper_levels, "capacity_streams": piper_cap,
         "loads": {"burst_multiples": [2.0, 4.0]}, "bursts": [], "input_length": []},
    ]}


def test_targets_against_constructed_runs():
    chorus = [closed(1, 0.10, 1.0), closed(2, 0.15, 2.0), closed(4, 0.19, 4.0), closed(8, 0.21, 8.0),
              closed(16, 0.24, 15.0), closed(32, 0.9, 16.0, viable=40.0)]
    piper = [closed(1, 0.8, 10.0, viable=100.0), closed(8, 4.2, 14.0)]
    errors = {"5xx": 0, "dropped": 0, "timeout": 3, "other": 0}
    checks = {c["target"]: c for c in targets(report(chorus, 16, piper, 0, burst(errors, 99.5, 20.0, 100.0, 0.03)))}
    assert checks["input length, pcm: 30-sentence ÷ 1-sentence TTFA p50"]["met"] is True
    assert checks["input length, mp3: 30-sentence ÷ 1-sentence TTFA p50"]["met"] is False
    assert checks["capacity (concurrent streams)"]["met"] is True
    assert checks["worst TTFA p95 up to capacity ÷ single-stream p95"]["value"] == pytest.approx(2.4)
    assert checks["worst TTFA p95 up to capacity ÷ single-stream p95"]["met"] is False
    assert checks["audio s per wall s at capacity ÷ Piper's best level"]["value"] == pytest.approx(15 / 14)
    assert checks["capacity ÷ Piper's capacity"]["value"] == "inf" and checks["capacity ÷ Piper's capacity"]["met"]
    assert checks["TTFA p95 at 8 streams ÷ Piper's"]["value"] == pytest.approx(0.05)
    burst_checks = [c for name, c in checks.items() if name.startswith("burst 4×")]
    assert [c["met"] for c in burst_checks] == [True, True, True, True, True]  # timeouts are not 5xx or dropped
    assert checks["closed loop 16 streams: TTFA p95 s"]["met"] is True
    assert checks["paced capacity (listeners)"]["value"] is None  # no paced level in this run
    assert len(checks) == 15


def test_refusals_are_judged_against_the_connection_floor_and_listeners_per_cpu_against_piper_by_sentence():
    chorus = [closed(1, 0.1, 1.0), closed(16, 0.2, 15.0) | {"refused_pct": 2.0}]
    no_errors = {"5xx": 0, "dropped": 0, "timeout": 0, "other": 0}
    run = report(chorus, 16, chorus, 1, burst(no_errors, 100.0, 50.0, 100.0, 0.12, floor_p99=0.08))
    run["systems"][0] |= {"paced": [{"load": 16, "audio_s_per_cpu_s": 30.0}], "paced_capacity": 64}
    run["systems"].append({"system": "piper-sentences", "closed_loop": [], "paced": [{"load": 16, "audio_s_per_cpu_s": 10.0}]})
    checks = {c["target"]: c for c in targets(run)}
    over_floor = checks["burst 4× capacity: 429 p99 − as many GET /health's p99 (the connection floor), s"]
    assert over_floor["value"] == pytest.approx(0.04) and over_floor["met"] is True
    assert checks["closed loop 16 streams: refused %"]["met"] is False
    assert checks["paced capacity (listeners)"]["met"] is True
    assert checks["16 paced listeners: audio s per server CPU s ÷ Piper by sentence's"]["value"] == pytest.approx(3.0)
    no_floor = report(chorus, 16, chorus, 1, burst(no_errors, 100.0, 50.0, 100.0, 0.12, floor_p99=None))
    assert {c["target"]: c for c in targets(no_floor)}[over_floor["target"]]["value"] is None


def test_burst_targets_fail_on_a_slow_or_bare_refusal_and_on_a_5xx():
    chorus = [closed(1, 0.1, 1.0)]
    slow = burst({"5xx": 1, "dropped": 0, "timeout": 0, "other": 0}, 100.0, 50.0, 90.0, 0.02)
    checks = [c for c in targets(report(chorus, 1, chorus, 1, slow)) if c["target"].startswith("burst 4×")]
    assert [c["met"] for c in checks] == [False, True, True, False, True]
    late = burst({"5xx": 0, "dropped": 0, "timeout": 0, "other": 0}, 100.0, 50.0, 100.0, 0.15, ttfa_p95=0.3)
    assert [c["met"] for c in targets(report(chorus, 1, chorus, 1, late))
            if c["target"].startswith("burst 4×")] == [True, True, False, True, False]


def test_targets_without_a_peer_or_a_passing_level():
    no_errors = {"5xx": 0, "dropped": 0, "timeout": 0, "other": 0}
    only_chorus = report([closed(1, 0.5, 1.0, viable=0.0)], 0, [], 0, burst(no_errors, 0.0, 0.0, None, None))
    only_chorus["systems"].pop()
    checks = {c["target"]: c for c in targets(only_chorus)}
    assert checks["capacity (concurrent streams)"]["met"] is False
    assert checks["worst TTFA p95 up to capacity ÷ single-stream p95"]["value"] is None
    assert not any("Piper" in name for name in checks)


def test_open_loop_loads_come_from_the_closed_loop_capacity():
    from argparse import Namespace

    from benchmarks.serving import derived_loads, poisson_seconds

    args = Namespace(poisson_fractions=[0.5, 1.0], burst_multiples=[2.0, 4.0], level_seconds=20.0)
    levels = [level(1, 100.0, 0.1) | {"mean_audio_s": 3.0}, level(2, 100.0, 0.2) | {"mean_audio_s": 4.0},
              level(4, 50.0, 0.9) | {"mean_audio_s": 5.0}]
    loads = derived_loads(levels, args)
    # Capacity 2 streams, each busy 4 s per request: 0.5 requests per second at capacity.
    assert loads["poisson_rates"] == [0.25, 0.5] and loads["burst_sizes"] == [4, 8]
    assert derived_loads([level(1, 0.0, 2.0) | {"mean_audio_s": 3.0}], args)["burst_sizes"] == [2, 4]
    assert poisson_seconds(2.0, args) == 20.0  # 40 arrivals expected in a level
    assert poisson_seconds(0.5, args) == 40.0  # long enough for 20
    assert poisson_seconds(0.1, args) == 60.0  # at most three levels
