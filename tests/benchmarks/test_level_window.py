"""A level of clients judged on its measured window, on constructed traces: which requests count,
the mean load held (a time-integral over the window), the audio delivered in it, and the held-load
flag that keeps a level that did not hold its load out of the capacity."""
from __future__ import annotations

import pytest

from benchmarks.capacity import CapacityCriteria
from benchmarks.serving import level_record
from benchmarks.serving_metrics import mean_concurrent, serving_capacity, window_summary
from benchmarks.serving_report import paced_table
from benchmarks.trace import RequestTrace, Window
from benchmarks.workloads import (ClientLevel, LevelTiming, RunResult, closed_loop_next_send,
                                  listener_next_send)

RATE = 1000  # samples per second: 100 samples = 0.1 s of audio
# Started at 0: a 2 s warm-up, then the window [2, 12).
TIMING = LevelTiming(ramp_s=2.0, window_s=10.0, drain_s=5.0)


def reply(sent: float, first: float, seconds: float, ended: float | None = None) -> RequestTrace:
    """Served: `seconds` of audio in one chunk at `first`, the response closed at `ended`."""
    return RequestTrace(sent, RATE, [(first, round(seconds * RATE))], ended_at=first if ended is None else ended)


def refusal(sent: float, retry_after: str) -> RequestTrace:
    trace = RequestTrace(sent, RATE, ended_at=sent + 0.01)
    trace.refuse(sent + 0.01, retry_after)
    return trace


def listeners(count: int) -> ClientLevel:
    return ClientLevel(count, 0.0, TIMING, listener_next_send)


def test_a_window_holds_its_start_not_its_end_and_clips_stretches():
    window = Window(2.0, 12.0)
    assert window.seconds == 10.0
    assert window.holds(2.0) and window.holds(11.999) and not window.holds(12.0) and not window.holds(1.9)
    assert window.overlap(0.0, 3.0) == 1.0 and window.overlap(11.0, 20.0) == 1.0
    assert window.overlap(0.0, 2.0) == 0.0 and window.overlap(13.0, 14.0) == 0.0
    with pytest.raises(ValueError):
        Window(3.0, 3.0)
    with pytest.raises(ValueError):
        LevelTiming(ramp_s=-1.0, window_s=10.0, drain_s=0.0)
    assert TIMING.window(100.0) == Window(102.0, 112.0)


def test_mean_concurrency_is_the_time_integral_over_the_window():
    window = Window(2.0, 6.0)
    # Inside the window: 0 s, 3 s and 2 s of the three stretches: 5 stretch-seconds over 4 s.
    assert mean_concurrent([(0.0, 2.0), (1.0, 5.0), (4.0, 10.0)], window) == pytest.approx(1.25)
    assert mean_concurrent([(0.0, 100.0)] * 3, window) == pytest.approx(3.0)


def test_a_listener_holds_load_until_its_reply_has_played_out_a_closed_loop_client_until_it_ends():
    played = reply(sent=1.0, first=1.2, seconds=4.0, ended=2.0)  # generated faster than it plays
    assert ClientLevel(1, 0.0, TIMING, listener_next_send).held(played) == (1.0, 5.2)
    assert ClientLevel(1, 0.0, TIMING, closed_loop_next_send).held(played) == (1.0, 2.0)
    stalled = reply(sent=1.0, first=1.2, seconds=0.5, ended=3.0)  # still streaming after it played out
    assert ClientLevel(1, 0.0, TIMING, listener_next_send).held(stalled) == (1.0, 3.0)
    # A refused client waits as Retry-After says: it holds its load meanwhile.
    assert ClientLevel(1, 0.0, TIMING, closed_loop_next_send).held(refusal(4.0, "2")) == (4.0, pytest.approx(6.01))


def two_listeners() -> list[RequestTrace]:
    """Listener A: warm-up request at 0.5 (first audio 0.7, 3 s long), then 3.7 and 7.9 (4 s each,
    the last playing past the window's end). Listener B: 1.5 (4 s), refused at 5.6 with Retry-After
    1, then 6.61 (2 s), then it stops listening at 8.71: B is gone for the window's last 3.29 s."""
    return [reply(0.5, 0.7, 3.0), reply(3.7, 3.9, 4.0), reply(7.9, 8.1, 4.0),
            reply(1.5, 1.6, 4.0), refusal(5.6, "1"), reply(6.61, 6.71, 2.0)]


def test_window_figures_count_the_requests_sent_in_it_and_the_audio_that_arrived_in_it():
    summary = window_summary(two_listeners(), listeners(2))
    # Sent in [2, 12): 3.7, 7.9, 5.6 (refused) and 6.61; the warm-up's 0.5 and 1.5 are not counted.
    assert (summary["requests"], summary["admitted"]) == (4, 3)
    assert summary["ttfa_p50"] == pytest.approx(0.2)
    assert summary["mean_audio_s"] == pytest.approx((4.0 + 4.0 + 2.0) / 3)
    # Audio that arrived in the window, whichever request it was of: the chunks at 3.9, 8.1 and
    # 6.71 (the warm-up's arrived at 0.7 and 1.6, before it): 10 s of audio in 10 s.
    assert summary["audio_s_per_wall_s"] == pytest.approx(1.0)
    assert (summary["warmup_seconds"], summary["window_seconds"]) == (2.0, 10.0)


def test_held_load_is_the_mean_listeners_holding_load_over_the_window():
    summary = window_summary(two_listeners(), listeners(2))
    # A holds load through the whole window (3.7 + 4.2 → 7.9 + 4.2 = 12.1 > 12): 10 s.
    # B: 1.5 → 5.6 (plays out), 5.6 → 6.61 (Retry-After), 6.61 → 8.71 (plays out): 6.71 s in the window.
    assert summary["held_clients"] == pytest.approx((10.0 + 6.71) / 10.0)
    assert summary["held_pct"] == pytest.approx(100 * 1.671 / 2)
    # In flight at the server (sent → ended): 3.7-3.9, 7.9-8.1, 5.6-5.61, 6.61-6.71: 0.51 s.
    assert summary["streams_in_flight"] == pytest.approx(0.051)


def paced_level(load: int, held_pct: float, p95: float = 0.1) -> dict:
    return {"load": load, "held_pct": held_pct, "held_clients": load * held_pct / 100, "streams_in_flight": 1.0,
            "served_viable_pct_200ms": 100.0, "ttfa_p95": p95, "requests": 10, "ttfa_p50": p95, "ttfa_p99": p95,
            "viable_pct_0ms": 100.0, "viable_pct_200ms": 100.0, "refused_pct": 0.0, "audio_s_per_wall_s": 1.0,
            "errors": {"5xx": 0}}


def test_a_level_that_did_not_hold_95_percent_of_its_load_does_not_count_toward_capacity():
    levels = [paced_level(16, 100.0), paced_level(32, 95.0), paced_level(48, 94.9), paced_level(64, 99.0)]
    assert serving_capacity(levels) == 32
    assert not CapacityCriteria().held({"held_pct": 83.55}) and CapacityCriteria().held({})  # Poisson: no clients
    with pytest.raises(ValueError):
        CapacityCriteria(min_held_pct=0.0)
    rows = paced_table({"criteria": {"min_held_pct": 95.0}, "systems": [{"system": "chorus", "paced": levels}]})
    assert "| chorus | 32 listeners | 32 → 30.4 (1.0) |" in rows[3]
    assert "| chorus | 48 listeners | 48 → 45.6 (1.0) ⚠ |" in rows[4]


def test_the_json_keeps_the_warm_up_requests_flagged_and_the_window():
    traces = two_listeners()
    record = level_record(2, RunResult(traces, 17.0, listeners(2)), 0.0)
    assert [t["counted"] for t in record["traces"]] == [False, True, True, False, True, True]
    assert record["window"] == [2.0, 12.0] and record["requests"] == 4
    assert record["held_pct"] == pytest.approx(83.55)
    poisson = level_record(1.0, RunResult(traces, 17.0), 0.0)  # no clients: every request counts
    assert poisson["requests"] == 6 and "held_pct" not in poisson and "window" not in poisson


def test_the_default_window_hears_every_text_length_of_the_serving_mix():
    from benchmarks.serving import WINDOW_TEXTS, parse_args, window_check, workload

    texts = workload("joe")
    default = window_check(texts, parse_args([]).level_seconds)
    assert default["window_covers_every_length"]
    assert parse_args([]).level_seconds >= WINDOW_TEXTS * default["longest_text_speech_s"] > 20.0  # the paragraphs
    assert not window_check(texts, parse_args(["--quick"]).level_seconds)["window_covers_every_length"]
