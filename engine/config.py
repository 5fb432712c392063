"""The engine's configuration: one dataclass per concern, gathered in one place."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Literal

from capacity.config import CapacityConfig
from engine.allocator import ALLOCATORS
from engine.audio.config import StreamingConfig
from engine.gpu_config import GpuConfig
from memory.config import CacheConfig
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
    # Admission's delay and every slack threshold (the two audio ones left None: the codec's).
    capacity: CapacityConfig = field(default_factory=CapacityConfig)
    # Fields left None take the codec's own values (SNAC and HiFi-GAN need different context).
    streaming: StreamingConfig = field(default_factory=StreamingConfig)
    gpu: GpuConfig = field(default_factory=GpuConfig)
    mode: Literal["process", "inproc"] = "process"
    # Torch intra-op threads of the core process. None: on the CPU, half the cores (the API
    # process needs the rest to encode audio, and oversubscribed OpenMP threads spin against each
    # other: measured 15x slower steps on a busy 2-core machine); on a GPU, torch's default.
    num_threads: int | None = None
    # A core process that dies is started again (after 0.5 s, doubling up to 10 s) at most this
    # many times within `restart_window_seconds`; one more death and the server gives up (exits
    # non-zero, for systemd, Kubernetes or Ray to act). 0: never restart.
    max_core_restarts: int = 5
    restart_window_seconds: float = 300.0
    # The core process's malloc (engine/allocator.py): `auto` preloads tcmalloc into a CPU core
    # when the system has it, `tcmalloc` requires it, `system` keeps glibc's.
    allocator: Literal["auto", "tcmalloc", "system"] = "auto"

    def core_threads(self) -> int | None:
        if self.num_threads is not None or self.model.torch_device.type != "cpu":
            return self.num_threads
        return max(1, (os.cpu_count() or 2) // 2)

    def __post_init__(self) -> None:
        if self.mode not in ("process", "inproc"):
            raise ValueError(f"mode must be 'process' or 'inproc', got {self.mode!r}")
        if self.num_threads is not None and self.num_threads < 1:
            raise ValueError(f"num_threads must be >= 1 or None, got {self.num_threads}")
        if self.allocator not in ALLOCATORS:
            raise ValueError(f"allocator must be one of {ALLOCATORS}, got {self.allocator!r}")
