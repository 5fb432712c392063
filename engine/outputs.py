"""What the engine hands back: audio chunks of one request, and engine-wide statistics."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from capacity.room import Room


@dataclass(slots=True)
class RequestMetrics:
    """Per-request timings in seconds, measured by the engine core (monotonic clock)."""

    queue_time: float = 0.0  # arrival → first scheduled
    time_to_first_audio: float | None = None  # arrival → first PCM chunk leaves the codec
    total_time: float = 0.0  # arrival → finished
    prompt_tokens: int = 0
    output_tokens: int = 0
    audio_seconds: float = 0.0
    num_preemptions: int = 0
    invalid_tokens: int = 0

    @property
    def real_time_factor(self) -> float | None:
        """Wall time to generate / audio duration (below 1 is faster than real time)."""
        return self.total_time / self.audio_seconds if self.audio_seconds else None


@dataclass(slots=True)
class AudioChunk:
    """The next piece of one request's audio. Chunks of a request arrive in order, exactly once;
    the last has `finished=True` and carries the reason and the request's metrics."""

    request_id: str
    pcm: np.ndarray  # float32 mono in [-1, 1] at `sample_rate`
    sample_rate: int
    finished: bool = False
    finish_reason: str | None = None  # "stop", "length", "abort", "error"
    error: str | None = None
    metrics: RequestMetrics | None = None


@dataclass(slots=True)
class EngineLimits:
    """What one request may use, as the engine core enforces it; computed once by the core and
    sent in its ready message. Invariant: both limits are positive."""

    # Prompt + outputs of one request: a prompt of at most context_tokens - 1 tokens is admitted.
    context_tokens: int
    # Outputs per second of audio, a property of the family (Orpheus: 7 tokens per SNAC frame).
    outputs_per_second: float

    def __post_init__(self) -> None:
        if self.context_tokens < 1:
            raise ValueError(f"context_tokens must be >= 1, got {self.context_tokens}")
        if not self.outputs_per_second > 0:
            raise ValueError(f"outputs_per_second must be > 0, got {self.outputs_per_second}")


@dataclass(slots=True)
class EngineStats:
    """A snapshot for health checks and Prometheus."""

    ready: bool = False
    num_running: int = 0
    num_waiting: int = 0
    # Admission: requests waiting for room (not yet handed to the scheduler), and totals of those
    # that started, that had to wait first, and that were refused as overload.
    num_queued: int = 0
    requests_admitted: int = 0
    requests_queued: int = 0
    requests_refused: int = 0
    # Capacity as the step-cost model sees it now: streams the engine can step faster than real
    # time, and the predicted seconds of a step of the streams running.
    realtime_capacity: int = 0
    predicted_step_seconds: float = 0.0
    # Room for new requests of the usual size (capacity/room.py), refreshed with each stats
    # message: the one estimate the API's early refusal, the Ray router and /metrics read.
    room: Room = field(default_factory=Room)
    kv_blocks_total: int = 0
    kv_blocks_used: int = 0
    prefix_cache_hit_rate: float = 0.0
    steps: int = 0
    tokens_generated: int = 0
    prompt_tokens_computed: int = 0
    audio_seconds_generated: float = 0.0
    finished_by_reason: dict[str, int] = field(default_factory=dict)
    # Summed over steps: the model forward (backbone + output head), the family's emit (sampling,
    # and a depth stage such as Qwen3-TTS's code predictor), the codec's decodes, and whole steps.
    # What is left is the engine's own work: scheduling, input preparation and bookkeeping.
    forward_seconds: float = 0.0
    emit_seconds: float = 0.0
    codec_seconds: float = 0.0
    step_seconds: float = 0.0

    @property
    def overhead_fraction(self) -> float:
        """Share of step time outside the model forward (the codec's decoding counts as overhead)."""
        return 1.0 - self.forward_seconds / self.step_seconds if self.step_seconds else 0.0

    @property
    def engine_overhead_fraction(self) -> float:
        """Share of step time outside both networks (LM forward and codec decode)."""
        if not self.step_seconds:
            return 0.0
        return 1.0 - (self.forward_seconds + self.codec_seconds) / self.step_seconds
