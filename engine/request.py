"""One request inside the engine core: its scheduling view, its family state, its listener."""
from __future__ import annotations

from dataclasses import dataclass

from capacity.listener import Listener
from engine.outputs import RequestMetrics
from model.families.base import StreamState
from scheduler.sequence import Sequence


@dataclass(slots=True, eq=False)
class Request:
    """Ties the scheduler's `Sequence` to the family's `StreamState` and the request's `Listener`
    under one id.

    Invariant: `seq` holds the counts (the scheduler's: outputs, limit, computed tokens),
    `stream` what the outputs were, and `seq.listener` is the one record of who hears the audio;
    only the engine's `RequestTable` changes any of them after a step. `finish_reason` is set
    once, when generation ends, and the request lives on only until its last audio is out.
    """

    request_id: str
    seq: Sequence
    stream: StreamState
    # When its speech reached the engine (the engine clock's seconds).
    arrival: float
    # Outputs its speech's later segments are expected to take: admission commits to them too
    # (0 once the next segment's request follows this one: that request commits to them).
    outputs_after: int = 0
    # The request of the same speech whose audio its listener hears right before this one's
    # (None: the first segment, or one whose predecessor's audio is all out).
    follows: Request | None = None
    first_scheduled: float | None = None
    # Fillers its stream has read while waiting for live text: each adds an output to its budget.
    fillers: int = 0
    finish_reason: str | None = None
    error: str | None = None

    @property
    def listener(self) -> Listener:
        return self.seq.listener

    # ---- what admission reads (capacity.admission.Candidate) --------------------------------

    @property
    def prompt_tokens(self) -> int:
        return self.seq.num_prompt_tokens

    @property
    def uncomputed_prompt_tokens(self) -> int:
        return max(0, self.seq.num_prompt_tokens - self.seq.num_computed_tokens)

    @property
    def max_outputs(self) -> int:
        return self.seq.max_output_tokens

    @property
    def outputs(self) -> int:
        return self.seq.num_output_tokens

    def metrics(self, now: float) -> RequestMetrics:
        listener = self.listener
        return RequestMetrics(
            queue_time=(self.first_scheduled or now) - self.arrival,
            time_to_first_audio=None if listener.first_audio_at is None else listener.first_audio_at - self.arrival,
            total_time=now - self.arrival,
            prompt_tokens=self.seq.num_prompt_tokens,
            output_tokens=self.seq.num_output_tokens,
            audio_seconds=listener.received_seconds,
            num_preemptions=self.seq.num_preemptions,
            invalid_tokens=self.stream.num_invalid_outputs,
        )
