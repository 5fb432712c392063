"""What a client saw of each request, and the streaming metrics computed from it.

Every load generator (HTTP, in-process, baselines, the GPU script) records `RequestTrace`s and
hands them to `summarize`, so all systems are judged by one set of definitions
(benchmarks/README.md, "How we measure").
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Sequence

# NOTE: a chunk that arrives within a microsecond of its playback time is on time; anything finer
# is float noise in the playback clock, not a stall a listener could hear.
_ON_TIME_TOLERANCE_S = 1e-6


@dataclass(slots=True)
class RequestTrace:
    """One request as the client saw it: send time, each audio chunk's arrival time and sample count.

    Times share one monotonic clock for the whole run; `chunks` is in arrival order, so arrival
    times never decrease. A request ends one of three ways: served (`ok`), refused by the server
    (`refused_at` set: an HTTP 429, `ok` False) or failed (`error` names how, `ok` False).
    `ended_at` is when the client saw it end, whichever way (the load generators set it; None:
    not recorded).
    """

    sent: float
    sample_rate: int
    chunks: list[tuple[float, int]] = field(default_factory=list)
    ok: bool = True
    refused_at: float | None = None
    # The refusal's Retry-After header as sent (None: absent).
    retry_after: str | None = None
    error: str | None = None
    ended_at: float | None = None

    def __post_init__(self) -> None:
        if self.sample_rate <= 0:
            raise ValueError(f"sample_rate must be positive, got {self.sample_rate}")

    def record(self, arrival: float, samples: int) -> None:
        self.chunks.append((arrival, samples))

    def refuse(self, at: float, retry_after: str | None) -> None:
        self.ok = False
        self.refused_at = at
        self.retry_after = retry_after

    def fail(self, error: str) -> None:
        """Marks the request failed; the first cause recorded is kept (a drain's cancellation
        after a dropped connection is still a dropped connection)."""
        self.ok = False
        self.error = self.error or error

    @property
    def admitted(self) -> bool:
        return self.refused_at is None

    @property
    def time_to_refusal(self) -> float | None:
        return None if self.refused_at is None else self.refused_at - self.sent

    @property
    def first_audio_at(self) -> float | None:
        return next((arrival for arrival, samples in self.chunks if samples > 0), None)

    @property
    def ttfa(self) -> float | None:
        first = self.first_audio_at
        return None if first is None else first - self.sent

    @property
    def audio_seconds(self) -> float:
        return sum(samples for _, samples in self.chunks) / self.sample_rate

    @property
    def finished_at(self) -> float | None:
        return self.chunks[-1][0] if self.chunks else None

    @property
    def rtf(self) -> float | None:
        # Below 1 the stream was generated faster than it plays.
        if self.finished_at is None or self.audio_seconds == 0:
            return None
        return (self.finished_at - self.sent) / self.audio_seconds


@dataclass(frozen=True, slots=True)
class Window:
    """A stretch [start, end) of the run's clock, such as a load level's measured window.
    Invariant: end > start."""

    start: float
    end: float

    def __post_init__(self) -> None:
        if not self.end > self.start:
            raise ValueError(f"a window must end after it starts, got [{self.start}, {self.end})")

    @property
    def seconds(self) -> float:
        return self.end - self.start

    def holds(self, at: float) -> bool:
        return self.start <= at < self.end

    def overlap(self, start: float, end: float) -> float:
        """Seconds of [start, end) inside the window (0 for a stretch wholly outside it)."""
        return max(0.0, min(end, self.end) - max(start, self.start))


def underrun_seconds(trace: RequestTrace, client_buffer_s: float = 0.0) -> float:
    """Total time playback would have stalled waiting for audio.

    Playback starts when the first chunk with audio arrives plus `client_buffer_s`, and plays each
    chunk's samples back to back; a chunk that arrives after its audio is due stalls playback until
    it arrives, which moves everything after it later too.
    """
    if client_buffer_s < 0:
        raise ValueError(f"client_buffer_s must be >= 0, got {client_buffer_s}")
    first = trace.first_audio_at
    if first is None:
        return 0.0
    playhead = first + client_buffer_s
    stalled = 0.0
    for arrival, samples in trace.chunks:
        if samples == 0:
            continue
        late = arrival - playhead
        if late > _ON_TIME_TOLERANCE_S:
            stalled += late
            playhead = arrival
        playhead += samples / trace.sample_rate
    return stalled


def is_viable(trace: RequestTrace, client_buffer_s: float = 0.0) -> bool:
    """A stream is viable when it succeeded, delivered audio, and never stalled playback."""
    return trace.ok and trace.ttfa is not None and underrun_seconds(trace, client_buffer_s) == 0.0


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile with linear interpolation between closest ranks (numpy's 'linear')."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"q must be in [0, 100], got {q}")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100.0
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def percentile_or_none(values: list[float], q: float) -> float | None:
    """`percentile`, or None for no values (JSON has no NaN)."""
    return percentile(values, q) if values else None


def summarize(
    traces: Iterable[RequestTrace], wall_seconds: float, client_buffer_s: float = 0.0
) -> dict[str, float | int | None]:
    """Run-level figures; a failed request counts as a stream that was not viable.

    Percentiles are None when no request produced audio (JSON has no NaN).
    """
    if wall_seconds <= 0:
        raise ValueError(f"wall_seconds must be positive, got {wall_seconds}")
    traces = list(traces)
    ttfas = [t.ttfa for t in traces if t.ok and t.ttfa is not None]
    rtfs = [t.rtf for t in traces if t.ok and t.rtf is not None]
    viable = sum(is_viable(t, client_buffer_s) for t in traces)
    return {
        "requests": len(traces),
        "failed": sum(not t.ok for t in traces),
        "ttfa_p50": percentile_or_none(ttfas, 50),
        "ttfa_p95": percentile_or_none(ttfas, 95),
        "ttfa_p99": percentile_or_none(ttfas, 99),
        "viable_pct": 100.0 * viable / len(traces) if traces else None,
        "underrun_s_total": sum(underrun_seconds(t, client_buffer_s) for t in traces if t.ok),
        "audio_s_per_wall_s": sum(t.audio_seconds for t in traces if t.ok) / wall_seconds,
        "rtf_p50": percentile_or_none(rtfs, 50),
        "rtf_p95": percentile_or_none(rtfs, 95),
    }
