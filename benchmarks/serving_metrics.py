"""Figures of one load level against a server over HTTP, and the capacity rule over levels.

Builds on `benchmarks/trace.py`'s definitions (TTFA, underruns with a client buffer,
percentiles) and adds what a server with admission control needs: refused requests (HTTP 429)
are kept apart from admitted ones, and errors are counted by kind.

A level of clients (`benchmarks/workloads.py`: closed loop, paced listeners) is judged on its
measured window: its request figures are of the requests sent in the window, and beside them
- *held clients*: the mean over the window of the clients holding load (`ClientLevel.held`: from
  a request's send until its client may send again), and `held_pct`, that against the nominal
  level; `streams_in_flight`: the mean of the requests sent and not yet ended (the server's
  concurrency, a 429 included while it is being answered);
- *audio seconds per second* (`audio_s_per_wall_s`, every level): the audio of served requests
  that arrived in the measured stretch, over its length: a level of clients' window, whichever
  request the audio belonged to; a Poisson or burst run's whole wall time.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from benchmarks.capacity import CapacityCriteria, capacity
from benchmarks.trace import RequestTrace, Window, is_viable, percentile_or_none

if TYPE_CHECKING:
    from benchmarks.workloads import ClientLevel

CLIENT_BUFFERS_MS = (0, 200)
ERROR_KINDS = ("5xx", "dropped", "timeout", "other")


def _pct(part: int, whole: int) -> float | None:
    return 100.0 * part / whole if whole else None


def error_kind(trace: RequestTrace) -> str | None:
    """How an admitted request failed: one of ERROR_KINDS (any unexpected status is "other")."""
    if trace.ok or not trace.admitted:
        return None
    return trace.error if trace.error in ERROR_KINDS else "other"


def audio_delivered(traces: Iterable[RequestTrace], window: Window | None = None) -> float:
    """Seconds of audio of served requests that arrived in `window` (None: all of it)."""
    return sum(samples / t.sample_rate for t in traces if t.ok
               for arrival, samples in t.chunks if window is None or window.holds(arrival))


def mean_concurrent(stretches: Iterable[tuple[float, float]], window: Window) -> float:
    """How many of `stretches` ([start, end) each) were under way, on average over `window`:
    the time-integral of their count over the window, divided by its length."""
    return sum(window.overlap(start, end) for start, end in stretches) / window.seconds


def held_load(traces: list[RequestTrace], level: ClientLevel) -> dict:
    """The load a level of clients held through its window (every trace counts, a warm-up
    request still open in the window too)."""
    window = level.window
    held = mean_concurrent((level.held(t) for t in traces), window)
    return {"held_clients": held, "held_pct": 100.0 * held / level.clients,
            "streams_in_flight": mean_concurrent(((t.sent, t.ended_at) for t in traces), window)}


def window_summary(traces: list[RequestTrace], level: ClientLevel) -> dict:
    """A level of clients' figures: `request_figures` of the requests sent in its window, the
    audio delivered in the window per second of it, the load held, and its warm-up and window."""
    window = level.window
    return {**request_figures([t for t in traces if window.holds(t.sent)]),
            "audio_s_per_wall_s": audio_delivered(traces, window) / window.seconds,
            **held_load(traces, level),
            "warmup_seconds": level.timing.ramp_s, "window_seconds": level.timing.window_s}


def level_summary(traces: Iterable[RequestTrace], wall_seconds: float) -> dict:
    """A Poisson or burst run's figures: `request_figures` of all its requests and the audio
    delivered per second of its wall time."""
    if wall_seconds <= 0:
        raise ValueError(f"wall_seconds must be positive, got {wall_seconds}")
    traces = list(traces)
    return {**request_figures(traces), "audio_s_per_wall_s": audio_delivered(traces) / wall_seconds}


def request_figures(traces: list[RequestTrace]) -> dict:
    """What a level's requests saw. TTFA percentiles and viability are over admitted requests (a
    failed admitted request counts as not viable); `served_viable_pct_200ms` is over all requests,
    a refused one counting as a stream not served: it is what the capacity rule reads."""
    admitted = [t for t in traces if t.admitted]
    refused = [t for t in traces if not t.admitted]
    ttfas = [t.ttfa for t in admitted if t.ok and t.ttfa is not None]
    served = [t for t in admitted if t.ok]
    viable = {ms: sum(is_viable(t, ms / 1000) for t in admitted) for ms in CLIENT_BUFFERS_MS}
    errors = {kind: 0 for kind in ERROR_KINDS}
    for trace in admitted:
        if (kind := error_kind(trace)) is not None:
            errors[kind] += 1
    refusal_times = [t.time_to_refusal for t in refused]
    return {
        "requests": len(traces),
        "admitted": len(admitted),
        "refused_pct": _pct(len(refused), len(traces)),
        "ttfa_p50": percentile_or_none(ttfas, 50),
        "ttfa_p95": percentile_or_none(ttfas, 95),
        "ttfa_p99": percentile_or_none(ttfas, 99),
        **{f"viable_pct_{ms}ms": _pct(viable[ms], len(admitted)) for ms in CLIENT_BUFFERS_MS},
        "served_viable_pct_200ms": _pct(viable[200], len(traces)),
        "mean_audio_s": sum(t.audio_seconds for t in served) / len(served) if served else None,
        "errors": errors,
        "refusal_p99_s": percentile_or_none(refusal_times, 99),
        "retry_after_pct": _pct(sum(t.retry_after is not None for t in refused), len(refused)),
    }


# The latency issue's capacity rule: ≥ 99 % viable at a 200 ms client buffer, p95 TTFA ≤ 250 ms.
SERVING_CRITERIA = CapacityCriteria(min_viable_pct=99.0, max_ttfa_p95_s=0.25)
# Paced listeners (issue 32): ≥ 99 % served and viable at a 200 ms buffer, p95 TTFA ≤ 150 ms.
PACED_CRITERIA = CapacityCriteria(min_viable_pct=99.0, max_ttfa_p95_s=0.15)


def capacity_point(level: dict) -> dict:
    """What the capacity rule reads of a level: the share of all its requests that were admitted
    and viable at a 200 ms buffer (a 429 is a stream not served), its admitted p95 TTFA, and the
    share of its nominal load it held (a level of clients only)."""
    return {"viable_pct": level["served_viable_pct_200ms"], "ttfa_p95": level["ttfa_p95"],
            "held_pct": level.get("held_pct")}


def serving_capacity(levels: list[dict], criteria: CapacityCriteria = SERVING_CRITERIA) -> float:
    """The largest level (closed-loop streams, or paced listeners) that passes with every level
    below it (0 when the first fails)."""
    return capacity([(lv["load"], capacity_point(lv)) for lv in levels], criteria)
