from __future__ import annotations

import math

import pytest

from capacity.config import CapacityConfig
from engine.config import EngineConfig
from engine.core import EngineCore
from engine.request import Request
from memory.config import CacheConfig
from model.config import ModelConfig
from model.loader import load_frontend
from model.tiny_random import ensure_tiny_random
from scheduler.config import SchedulerConfig
from tests.engine.fake_clock import StepClock


@pytest.fixture(scope="session")
def tiny_model(chorus_cache) -> str:
    return str(ensure_tiny_random())


def wall_clock_capacity(**overrides) -> CapacityConfig:
    """For engines on the wall clock (EngineClient, live servers), whose tests add many requests
    at once with no listener to keep up with, and compare audio across runs byte for byte:
    admission off (it would refuse the work they need finished) and fixed chunking that decodes
    every due window at once (adaptive chunking picks seams by wall-clock slack). Tests of those
    on the wall clock turn them on through `overrides`; core tests run them on a StepClock."""
    return CapacityConfig(**{"max_queue_delay": None, "urgent_slack_seconds": 0,
                             "defer_slack_seconds": math.inf, **overrides})


def engine_config(model: str, num_blocks: int = 512, mode: str = "inproc", capacity: CapacityConfig | None = None,
                  **scheduler) -> EngineConfig:
    """The sizes tests use; `capacity` None: `wall_clock_capacity()`."""
    scheduler.setdefault("max_num_seqs", 32)
    scheduler.setdefault("max_num_batched_tokens", 256)
    return EngineConfig(
        model=ModelConfig(model=model, device="cpu"),
        cache=CacheConfig(block_size=16, num_blocks=num_blocks),
        scheduler=SchedulerConfig(**scheduler),
        capacity=capacity or wall_clock_capacity(),
        mode=mode,
    )


@pytest.fixture
def make_core(tiny_model):
    """A core on a `StepClock` (`core.clock`): its decisions are production's, and deterministic.
    `step_cost` and `row_cost` (StepClock.attach's) set how fast its machine is; the rest are
    engine_config's."""
    def make(**kwargs) -> EngineCore:
        costs = {name: kwargs.pop(name) for name in ("step_cost", "row_cost") if name in kwargs}
        clock = StepClock()
        kwargs.setdefault("capacity", CapacityConfig())  # production's: the StepClock makes it deterministic
        core = EngineCore(engine_config(tiny_model, **kwargs), clock=clock)
        clock.attach(core, **costs)
        return core

    return make


def core_on_step_clock(config: EngineConfig, family=None, **costs) -> EngineCore:
    """A core of `config` (and `family`, if given) on a fresh `StepClock` (`core.clock`), whose
    steps cost `costs` (StepClock.attach's): what make_core does, for other configs and families."""
    clock = StepClock()
    core = EngineCore(config, family, clock=clock)
    clock.attach(core, **costs)
    return core


@pytest.fixture(scope="session")
def tiny_frontend(tiny_model):
    return load_frontend(ModelConfig(model=tiny_model))


def drain(core: EngineCore, max_steps: int = 20_000) -> dict:
    """Steps until idle; returns each request's chunks in arrival order."""
    chunks: dict[str, list] = {}
    for _ in range(max_steps):
        if not core.has_work:
            return chunks
        for chunk in core.step():
            chunks.setdefault(chunk.request_id, []).append(chunk)
    raise AssertionError("engine did not become idle")


def started(core: EngineCore, request_id: str) -> Request:
    """The request `request_id`, which must have started (not be waiting in admission's queue)."""
    request = core.requests.get(request_id)
    assert request is not None, f"{request_id!r} did not start (queued: {core.admission.is_queued(request_id)})"
    return request
