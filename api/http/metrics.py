"""Prometheus metrics: one registry per app, API-side measurements plus the engine's stats."""
from __future__ import annotations

from typing import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from api.http.supervisor import api_restarts
from engine.outputs import EngineStats

# "cleared": a speak-WebSocket turn that a Clear (barge-in) ended.
OUTCOMES = ("completed", "disconnected", "invalid", "rejected", "unavailable", "error", "cleared")

# Time to first audio spans tens of milliseconds (warm, idle GPU) to many seconds (overload).
TTFA_BUCKETS = (0.025, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 30.0)
# A sentence's prompt takes milliseconds (Orpheus' tokenizer) to tens of ms (joe's front end); a
# long segment or a deep queue, seconds.
PROMPT_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
# The prompt pool's job kinds: a speech's first segment (its first audio waits on it), or a later one.
PROMPT_KINDS = ("first", "later")
# Why a voice upload's decoder process failed its job (api/voices/clip_decoder.py).
CLIP_DECODER_FAILURES = ("crashed", "timeout", "memory", "cpu", "protocol")


class EngineStatsCollector(Collector):
    """Reads the engine's latest stats snapshot at scrape time, so values never go stale."""

    def __init__(self, read_stats: Callable[[], EngineStats], read_refused_early: Callable[[], int],
                 read_restarts: Callable[[], int]) -> None:
        self._read_stats = read_stats
        self._read_refused_early = read_refused_early
        self._read_restarts = read_restarts

    def collect(self) -> Iterator:
        stats = self._read_stats()
        yield GaugeMetricFamily("chorus_streams_running", "Streams being generated", value=stats.num_running)
        yield GaugeMetricFamily("chorus_streams_waiting", "Streams waiting to start", value=stats.num_waiting)
        yield GaugeMetricFamily("chorus_kv_blocks_used", "KV cache blocks in use", value=stats.kv_blocks_used)
        yield GaugeMetricFamily(
            "chorus_kv_blocks_free", "KV cache blocks free", value=stats.kv_blocks_total - stats.kv_blocks_used
        )
        yield GaugeMetricFamily(
            "chorus_prefix_cache_hit_rate", "Share of prompt tokens served from the prefix cache",
            value=stats.prefix_cache_hit_rate,
        )
        yield GaugeMetricFamily("chorus_streams_queued", "Requests waiting for admission", value=stats.num_queued)
        admission = CounterMetricFamily(
            "chorus_admission_requests", "New requests by admission decision (queued ones also count when they "
            "start or are refused; refused_early: refused by the API before their prompt was prepared)",
            labels=["decision"],
        )
        for decision, count in (("admitted", stats.requests_admitted), ("queued", stats.requests_queued),
                                ("refused", stats.requests_refused), ("refused_early", self._read_refused_early())):
            admission.add_metric([decision], count)
        yield admission
        yield GaugeMetricFamily(
            "chorus_realtime_capacity_streams", "Streams the engine can step faster than real time, as measured now",
            value=stats.realtime_capacity,
        )
        yield GaugeMetricFamily(
            "chorus_predicted_step_seconds", "The step-cost model's time for a step of the streams running",
            value=stats.predicted_step_seconds,
        )
        # What the API's early refusal and the Ray Serve router act on: a scaler or router can too.
        yield GaugeMetricFamily(
            "chorus_room_streams", "New streams of the usual size that could start now, each keeping every running "
            "stream's playback deadline (at most 8; as of the engine's last report)", value=stats.room.now,
        )
        yield GaugeMetricFamily(
            "chorus_room_in_time_streams", "New streams of the usual size that would start by their first-audio "
            "deadline, at once or after waiting in the queue (at most 8; as of the engine's last report)",
            value=stats.room.in_time,
        )
        yield GaugeMetricFamily(
            "chorus_room_in_time_short_streams", "The same for short streams (the lower quartile of recent "
            "sizes): what the API's early refusal and the Ray Serve router compare (at most 8)",
            value=stats.room.in_time_for_short,
        )
        yield GaugeMetricFamily(
            "chorus_seconds_until_room", "With no room now, seconds until a stream of the usual size could start",
            value=stats.room.seconds_until,
        )
        yield CounterMetricFamily("chorus_engine_steps", "Engine steps run", value=stats.steps)
        yield CounterMetricFamily("chorus_tokens_generated", "Audio tokens generated", value=stats.tokens_generated)
        yield CounterMetricFamily(
            "chorus_audio_seconds_generated", "Seconds of audio generated", value=stats.audio_seconds_generated
        )
        finished = CounterMetricFamily(
            "chorus_engine_requests_finished", "Engine requests finished, by reason", labels=["reason"]
        )
        for reason, count in sorted(stats.finished_by_reason.items()):
            finished.add_metric([reason], count)
        yield finished
        yield CounterMetricFamily("chorus_engine_core_restarts", "Engine core processes started again after one died",
                                  value=self._read_restarts())
        yield CounterMetricFamily("chorus_api_restarts", "API processes `chorus serve` started again after one died",
                                  value=api_restarts() or 0)


class PromptPoolMetrics:
    """The prompt-preparation pool's measurements, each labelled by job kind (PROMPT_KINDS):
    jobs queued now, how long a job waited before a worker took it, how long it prepared."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.queue_depth = Gauge(
            "chorus_prompt_queue_depth", "Prompt preparations waiting for a worker", ["kind"], registry=self.registry
        )
        self.wait_seconds = Histogram(
            "chorus_prompt_wait_seconds", "Queued to taken by a worker, per prompt preparation", ["kind"],
            buckets=PROMPT_BUCKETS, registry=self.registry,
        )
        self.prepare_seconds = Histogram(
            "chorus_prompt_prepare_seconds", "Preparation time of one segment's prompt", ["kind"],
            buckets=PROMPT_BUCKETS, registry=self.registry,
        )
        self.cache_hits = Counter(
            "chorus_prompt_cache_hits", "Prompts served from the prompt cache (a text said again), no worker needed",
            registry=self.registry,
        )
        self.cache_bytes = Gauge("chorus_prompt_cache_bytes", "What the prompt cache holds, about", registry=self.registry)
        for kind in PROMPT_KINDS:
            self.queue_depth.labels(kind).set(0)
            self.wait_seconds.labels(kind)
            self.prepare_seconds.labels(kind)


class ApiMetrics:
    """The app's registry. Invariant: every speech request is counted exactly once, under one
    outcome of OUTCOMES."""

    def __init__(self, read_stats: Callable[[], EngineStats], read_refused_early: Callable[[], int] = lambda: 0,
                 read_restarts: Callable[[], int] = lambda: 0) -> None:
        self.registry = CollectorRegistry()
        self.time_to_first_audio = Histogram(
            "chorus_time_to_first_audio_seconds",
            "Request arrival to the first audio bytes, measured in the API",
            buckets=TTFA_BUCKETS,
            registry=self.registry,
        )
        self._requests = Counter(
            "chorus_requests", "Speech requests by outcome", ["outcome"], registry=self.registry
        )
        for outcome in OUTCOMES:
            self._requests.labels(outcome)
        self.prompts = PromptPoolMetrics(self.registry)
        self.clip_decoder_failures = Counter(
            "chorus_clip_decoder_failures", "Voice-upload decoder processes that failed their upload, by cause",
            ["cause"], registry=self.registry,
        )
        for cause in CLIP_DECODER_FAILURES:
            self.clip_decoder_failures.labels(cause)
        self.registry.register(EngineStatsCollector(read_stats, read_refused_early, read_restarts))

    def count_request(self, outcome: str) -> None:
        if outcome not in OUTCOMES:
            raise ValueError(f"unknown outcome {outcome!r}")
        self._requests.labels(outcome).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)
