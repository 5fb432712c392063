"""Scheduling knobs: one validated dataclass that the CLI and the engine config map onto."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(slots=True)
class SchedulerConfig:
    """Per-step limits of the scheduler; `max_num_batched_tokens >= max_num_seqs` so that every
    running stream can always get its decode token in the same step."""

    max_num_seqs: int = 64
    max_num_batched_tokens: int = 512
    # Cap on one prompt's prefill chunk; None means "whatever is left of the step budget".
    max_prefill_chunk: int | None = None
    policy: Literal["fcfs", "priority"] = "fcfs"
    # Waiting requests beyond this are refused at admission (the API turns that into HTTP 429).
    max_waiting: int = 1024
    # A new request waits at most this many seconds for its first audio (counted from when its
    # speech reached the server, when the API says: its prompt's preparation included): one that
    # cannot have it by then is refused at once (HTTP 429). None turns admission off: every request goes to the
    # waiting queue whatever the load (offline use, and tests of the batching mechanics).
    max_queue_delay: float | None = 1.0
    # A running stream whose listener holds more than this many seconds of audio sits out steps
    # that carry a prompt, making them cheaper for the new stream's first audio and the others (a
    # step's cost grows with its rows); None: every running stream takes every step.
    skip_slack_seconds: float | None = 4.0

    def __post_init__(self) -> None:
        if self.max_num_seqs < 1:
            raise ValueError(f"max_num_seqs must be >= 1, got {self.max_num_seqs}")
        if self.max_num_batched_tokens < self.max_num_seqs:
            raise ValueError(
                "max_num_batched_tokens must be >= max_num_seqs so every running stream gets its "
                f"decode token each step (got {self.max_num_batched_tokens} < {self.max_num_seqs})"
            )
        if self.max_prefill_chunk is not None and self.max_prefill_chunk < 1:
            raise ValueError(f"max_prefill_chunk must be >= 1 or None, got {self.max_prefill_chunk}")
        if self.policy not in ("fcfs", "priority"):
            raise ValueError(f"policy must be 'fcfs' or 'priority', got {self.policy!r}")
        if self.max_waiting < 1:
            raise ValueError(f"max_waiting must be >= 1, got {self.max_waiting}")
        for name in ("max_queue_delay", "skip_slack_seconds"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"{name} must be > 0 seconds or None, got {value}")
