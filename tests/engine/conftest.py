from __future__ import annotations

import math

import pytest

from engine.audio.config import StreamingConfig
from engine.config import EngineConfig
from engine.core import EngineCore
from memory.config import CacheConfig
from model.config import ModelConfig
from model.loader import load_frontend
from model.tiny_random import ensure_tiny_random
from scheduler.config import SchedulerConfig


@pytest.fixture(scope="session")
def tiny_model(chorus_cache) -> str:
    return str(ensure_tiny_random())


def engine_config(model: str, num_blocks: int = 512, mode: str = "inproc", **scheduler) -> EngineConfig:
    scheduler.setdefault("max_num_seqs", 32)
    scheduler.setdefault("max_num_batched_tokens", 256)
    # NOTE: these tests add many requests at once and step the core as fast as it goes, with no
    # listener to keep up with: admission would refuse the work they need finished, so it is off
    # unless a test turns it on (tests/engine/test_admission_core.py, tests/api/test_overload.py).
    scheduler.setdefault("max_queue_delay", None)
    return EngineConfig(
        model=ModelConfig(model=model, device="cpu"),
        cache=CacheConfig(block_size=16, num_blocks=num_blocks),
        scheduler=SchedulerConfig(**scheduler),
        # NOTE: tests compare audio (and frames) across runs byte for byte; adaptive chunking picks
        # seams by wall-clock slack (seams differ by ~1e-3), and windows that wait for a later step
        # move listeners' deadlines and with them the batches, so tests use fixed chunking that
        # decodes every due window at once. Both have their own tests in tests/engine/audio.
        streaming=StreamingConfig(urgent_slack_seconds=0, defer_slack_seconds=math.inf),
        mode=mode,
    )


@pytest.fixture
def make_core(tiny_model):
    def make(**kwargs) -> EngineCore:
        return EngineCore(engine_config(tiny_model, **kwargs))

    return make


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
