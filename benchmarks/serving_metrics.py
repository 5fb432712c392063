"""Figures of one load level against a server over HTTP, and the capacity rule over levels.

Builds on `benchmarks/trace.py`'s definitions (TTFA, underruns with a client buffer,
percentiles) and adds what a server with admission control needs: refused requests (HTTP 429)
are kept apart from admitted ones, and errors are counted by kind.
"""
from __future__ import annotations

from typing import Iterable

from benchmarks.capacity import CapacityCriteria, capacity
from benchmarks.trace import RequestTrace, is_viable, percentile_or_none

CLIENT_BUFFERS_MS = (0, 200)
ERROR_KINDS = ("5xx", "dropped", "timeout", "other")


def _pct(part: int, whole: int) -> float | None:
    return 100.0 * part / whole if whole else None


def error_kind(trace: RequestTrace) -> str | None:
    """How an admitted request failed: one of ERROR_KINDS (any unexpected status is "other")."""
    if trace.ok or not trace.admitted:
        return None
    return trace.error if trace.error in ERROR_KINDS else "other"


def level_summary(traces: Iterable[RequestTrace], wall_seconds: float) -> dict:
    """One level's figures. TTFA percentiles and viability are over admitted requests (a failed
    admitted request counts as not viable); `served_viable_pct_200ms` is over all requests, a
    refused one counting as a stream not served: it is what the capacity rule reads."""
    if wall_seconds <= 0:
        raise ValueError(f"wall_seconds must be positive, got {wall_seconds}")
    traces = list(traces)
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
        "audio_s_per_wall_s": sum(t.audio_seconds for t in served) / wall_seconds,
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
    and viable at a 200 ms buffer (a 429 is a stream not served), and its admitted p95 TTFA."""
    return {"viable_pct": level["served_viable_pct_200ms"], "ttfa_p95": level["ttfa_p95"]}


def serving_capacity(levels: list[dict], criteria: CapacityCriteria = SERVING_CRITERIA) -> float:
    """The largest level (closed-loop streams, or paced listeners) that passes with every level
    below it (0 when the first fails)."""
    return capacity([(lv["load"], capacity_point(lv)) for lv in levels], criteria)
