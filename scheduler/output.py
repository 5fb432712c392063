"""What one scheduling decision hands to the model runner."""
from __future__ import annotations

from dataclasses import dataclass, field

from scheduler.sequence import Sequence


@dataclass(slots=True)
class ScheduledChunk:
    """`num_new_tokens` tokens of `seq`, starting at position `start`. The chunk produces an output
    (a sampled token or frame) exactly when it reaches the end of the sequence's known tokens."""

    seq: Sequence
    start: int
    num_new_tokens: int
    # Fixed when scheduled: counting the output (update_from_output) moves seq.num_tokens.
    produces_output: bool = field(init=False)

    def __post_init__(self) -> None:
        self.produces_output = self.end == self.seq.num_tokens

    @property
    def end(self) -> int:
        return self.start + self.num_new_tokens


@dataclass(slots=True)
class SchedulerOutput:
    """One step's work. Invariant: sum of chunk sizes <= the step's token budget, each sequence at
    most once."""

    chunks: list[ScheduledChunk] = field(default_factory=list)
    preempted_ids: list[str] = field(default_factory=list)

    @property
    def num_batched_tokens(self) -> int:
        return sum(chunk.num_new_tokens for chunk in self.chunks)

    @property
    def is_empty(self) -> bool:
        return not self.chunks
