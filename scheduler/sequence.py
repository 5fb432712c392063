"""The scheduler's view of one request: token counts, never token values or tensors."""
from __future__ import annotations

import enum
import itertools
from dataclasses import dataclass, field

from capacity.listener import Listener

_arrival_counter = itertools.count()


class SequenceStatus(enum.Enum):
    WAITING = "waiting"
    RUNNING = "running"
    PREEMPTED = "preempted"
    FINISHED = "finished"


@dataclass(slots=True, eq=False)
class Sequence:
    """A request as "computed tokens / total tokens".

    Invariant: 0 <= num_computed_tokens <= num_tokens, where num_tokens = prompt + outputs so far,
    and num_output_tokens <= max_output_tokens; the scheduler alone counts the outputs.
    Prefill and decode are the same thing at different sizes: a step gives the sequence
    `num_tokens - num_computed_tokens` tokens or fewer. Preemption resets num_computed_tokens to 0
    but keeps the outputs, so resumption recomputes them instead of generating them again (no audio
    is lost or duplicated).
    """

    request_id: str
    num_prompt_tokens: int
    # The sequence ends with reason "length" once it has produced this many outputs.
    max_output_tokens: int
    priority: int = 0
    # Hashes of the prompt's full blocks, for prefix-cache lookups (empty when caching is off).
    prompt_block_hashes: list[int] = field(default_factory=list)
    num_output_tokens: int = 0
    num_computed_tokens: int = 0
    status: SequenceStatus = SequenceStatus.WAITING
    num_preemptions: int = 0
    arrival_index: int = field(default_factory=lambda: next(_arrival_counter))
    # Who hears its audio: the engine's request table writes it, the scheduler reads its deadline.
    listener: Listener = field(default_factory=Listener)
    # Its client has fallen too far behind the audio already made (backpressure): it keeps its
    # blocks but takes no step until it is resumed.
    paused: bool = False
    # Its model waits for text that has not arrived (live text read while speaking): it keeps its
    # blocks but takes no step until the text comes.
    awaiting_input: bool = False

    @property
    def takes_steps(self) -> bool:
        return not (self.paused or self.awaiting_input)

    @property
    def deadline(self) -> float:
        """When its listener runs dry, or before its first audio, when that is due (the engine
        clock's seconds); the scheduler serves the earliest first. inf: no listener waits on it
        (it goes after every stream that has one)."""
        return self.listener.deadline

    @property
    def num_tokens(self) -> int:
        return self.num_prompt_tokens + self.num_output_tokens

    @property
    def num_uncomputed_tokens(self) -> int:
        return self.num_tokens - self.num_computed_tokens

    @property
    def is_prefilling(self) -> bool:
        """More than one token to compute: a prompt, or outputs being recomputed after preemption."""
        return self.num_uncomputed_tokens > 1

    @property
    def is_finished(self) -> bool:
        return self.status is SequenceStatus.FINISHED
