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
    # Waiting requests beyond this are refused (the API turns that into HTTP 429); admission's
    # thresholds are capacity/config.py's.
    max_waiting: int = 1024

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
