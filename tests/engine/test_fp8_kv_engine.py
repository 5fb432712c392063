"""An engine whose CacheConfig asks for an fp8 KV cache allocates one and serves from it."""
from __future__ import annotations

import torch

from capacity.config import CapacityConfig
from memory.config import CacheConfig
from model.sampling import SamplingParams
from tests.engine.conftest import core_on_step_clock, drain, engine_config, started


def test_fp8_kv_cache_engine_streams_to_completion(tiny_model, tiny_frontend):
    config = engine_config(tiny_model, max_num_seqs=2, capacity=CapacityConfig())  # production's, on a StepClock
    config.cache = CacheConfig(block_size=16, num_blocks=64, kv_cache_dtype="fp8_e4m3")
    core = core_on_step_clock(config)
    assert all(cache.dtype == torch.float8_e4m3fn for cache in core.runner.kv_caches)
    streams = {}
    for i in range(2):
        core.add_request(f"r{i}", tiny_frontend.prepare(f"voice {i}", "tara"), SamplingParams(seed=i, max_tokens=21))
        streams[f"r{i}"] = started(core, f"r{i}").stream
    chunks = drain(core)
    for rid, got in chunks.items():
        assert got[-1].finished and got[-1].error is None
        assert sum(len(c.pcm) for c in got) == streams[rid].num_frames * core.family.codec.samples_per_frame
    assert core.kv_manager.num_free_blocks == core.kv_manager.num_blocks
