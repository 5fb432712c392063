"""Iteration-level scheduling under a per-step token budget (pure Python, no tensors)."""
from scheduler.config import SchedulerConfig
from scheduler.output import ScheduledChunk, SchedulerOutput
from scheduler.scheduler import QueueFullError, Scheduler
from scheduler.sequence import Sequence, SequenceStatus

__all__ = [
    "QueueFullError",
    "ScheduledChunk",
    "Scheduler",
    "SchedulerConfig",
    "SchedulerOutput",
    "Sequence",
    "SequenceStatus",
]
