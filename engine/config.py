"""The engine's configuration: one dataclass per concern, gathered in one place."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from memory.config import CacheConfig
from model.codecs.streaming import StreamingConfig
from model.config import ModelConfig
from scheduler.config import SchedulerConfig


@dataclass(slots=True)
class EngineConfig:
    """Everything the engine core needs to start; `mode` says where the core runs: its own
    process (`process`, what the server uses) or a thread of the caller (`inproc`, tests and
    debugging)."""

    model: ModelConfig = field(default_factory=ModelConfig)
    cache: CacheConfig = field(default_factory=CacheConfig)
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
    streaming: StreamingConfig = field(default_factory=StreamingConfig)
    mode: Literal["process", "inproc"] = "process"
    # Torch intra-op threads for the core (None: torch's default).
    num_threads: int | None = None

    def __post_init__(self) -> None:
        if self.mode not in ("process", "inproc"):
            raise ValueError(f"mode must be 'process' or 'inproc', got {self.mode!r}")
        if self.num_threads is not None and self.num_threads < 1:
            raise ValueError(f"num_threads must be >= 1 or None, got {self.num_threads}")
