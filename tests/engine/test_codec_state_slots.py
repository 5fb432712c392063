"""The 12 Hz codec's per-stream state lives in a memory-owned slot pool: a stream takes a slot
when it starts and returns it when its last audio leaves; a burst beyond the slots is refused
(429, overloaded) or waits in admission's queue, never runs out of memory."""
from __future__ import annotations

import dataclasses

import pytest

from capacity.config import CapacityConfig
from engine.errors import RequestRejected
from model.config import ModelConfig
from model.loader import load_family, load_frontend
from model.sampling import SamplingParams
from tests.engine.conftest import core_on_step_clock, drain, engine_config, wall_clock_capacity

SLOTS = 4
PARAMS = SamplingParams(temperature=0.0, max_tokens=3)


@pytest.fixture(scope="module")
def qwen3(chorus_cache):
    config = ModelConfig(model="tiny-random-qwen3", device="cpu", dtype="float32")
    return load_family(config), load_frontend(config)


def make_core(family, capacity: CapacityConfig):
    config = engine_config("tiny-random-qwen3", num_blocks=256, capacity=capacity, max_num_seqs=16)
    config.cache = dataclasses.replace(config.cache, codec_state_slots=SLOTS)
    return core_on_step_clock(config, family, step_cost=0.001, row_cost=0.001)


def test_streams_beyond_the_slots_are_refused_as_overloaded_and_every_slot_comes_back(qwen3):
    family, frontend = qwen3
    core = make_core(family, wall_clock_capacity())  # admission off: every request starts or is refused
    pool = core.audio.decoder.state_pool
    assert pool.num_slots == SLOTS
    refused = []
    for i in range(SLOTS + 2):
        try:
            core.add_request(f"r{i}", frontend.prepare("Hello there.", "vivian"), PARAMS)
        except RequestRejected as exc:
            refused.append((f"r{i}", exc))
    assert [rid for rid, _ in refused] == ["r4", "r5"]
    assert all(exc.code == "overloaded" and exc.retry_after > 0 for _, exc in refused)
    chunks = drain(core)
    assert sorted(chunks) == [f"r{i}" for i in range(SLOTS)]
    assert pool.num_free == SLOTS and core.kv_manager.num_free_blocks == core.kv_manager.num_blocks


def test_with_admission_a_burst_waits_for_slots_and_completes(qwen3):
    family, frontend = qwen3
    core = make_core(family, CapacityConfig(max_queue_delay=30.0))
    for i in range(SLOTS + 3):
        core.add_request(f"r{i}", frontend.prepare("Hello there.", "vivian"), PARAMS)
    assert [r.request_id for r in core.admission.queue] == ["r4", "r5", "r6"]
    chunks = drain(core)
    assert sorted(chunks) == sorted(f"r{i}" for i in range(SLOTS + 3))
    assert all(got[-1].finish_reason in ("stop", "length") for got in chunks.values())
    assert core.audio.decoder.state_pool.num_free == SLOTS


def test_the_state_pool_exists_before_the_kv_cache_is_sized(qwen3, monkeypatch):
    """On a GPU the KV pool takes the memory left after a profiled step: the codec's state pool
    must be allocated by then, or the KV cache is promised what the states need."""
    import engine.core
    from engine.audio.stage import AudioStage

    family, _ = qwen3
    events: list[str] = []
    build_stage, build_runner = AudioStage.build, engine.core.build_model_runner

    def stage(*args, **kwargs):
        events.append("codec state pool")
        return build_stage(*args, **kwargs)

    def runner(*args, **kwargs):
        events.append("kv cache")
        return build_runner(*args, **kwargs)

    monkeypatch.setattr(AudioStage, "build", stage)
    monkeypatch.setattr(engine.core, "build_model_runner", runner)
    core = make_core(family, wall_clock_capacity())
    assert events == ["codec state pool", "kv cache"] and core.audio.decoder.state_pool is not None
