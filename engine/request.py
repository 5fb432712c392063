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
    # Outputs its speech's later segments are expected to take: admission commits to them too.
    outputs_after: int = 0
    first_scheduled: float | None = None
    first_audio: float | None = None
    finish_reason: str | None = None
    error: str | None = None
    samples_emitted: int = 0

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
