"""One request inside the engine core: its scheduling view, its family state, its clock."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from engine.outputs import RequestMetrics
from model.families.base import StreamState
from scheduler.sequence import Sequence


@dataclass(slots=True, eq=False)
class Request:
    """Ties the scheduler's `Sequence` to the family's `StreamState` under one id.

    Invariant: `seq` holds the counts (the scheduler's: outputs, limit, computed tokens) and
    `stream` what the outputs were; `finish_reason` is set once, when generation ends, and the
    request lives on only until its last audio is out.
    """

    request_id: str
    seq: Sequence
    stream: StreamState
    arrival: float = field(default_factory=time.monotonic)
    # Its first audio is due by then (arrival + max_queue_delay; inf with admission off).
    first_audio_deadline: float = math.inf
    # Outputs its speech's later segments are expected to take: admission commits to them too
    # (0 once the next segment's request follows this one: that request commits to them).
    outputs_after: int = 0
    # The request of the same speech whose audio its listener hears right before this one's
    # (None: the first segment, or one whose predecessor had gone), and when that audio runs out
    # as far as it is out (its listener starts on this request's audio no sooner).
    follows: Request | None = None
    plays_after: float | None = None
    first_scheduled: float | None = None
    first_audio: float | None = None
    finish_reason: str | None = None
    error: str | None = None
    samples_emitted: int = 0

    def runs_dry_at(self, sample_rate: int) -> float | None:
        """When its listener will have played all of its audio out so far (None before its first
        audio): playback starts at its first audio, or once the audio before it has run out."""
        if self.first_audio is None:
            return None
        start = self.first_audio if self.plays_after is None else max(self.first_audio, self.plays_after)
        return start + self.samples_emitted / sample_rate

    def metrics(self, sample_rate: int, now: float) -> RequestMetrics:
        return RequestMetrics(
            queue_time=(self.first_scheduled or now) - self.arrival,
            time_to_first_audio=None if self.first_audio is None else self.first_audio - self.arrival,
            total_time=now - self.arrival,
            prompt_tokens=self.seq.num_prompt_tokens,
            output_tokens=self.seq.num_output_tokens,
            audio_seconds=self.samples_emitted / sample_rate,
            num_preemptions=self.seq.num_preemptions,
            invalid_tokens=self.stream.num_invalid_outputs,
        )
