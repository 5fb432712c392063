"""1,000 requests over 20 cloned voices (x-vector and in context, clips of different lengths):
each voice's prompt blocks are shared through the prefix cache while it is used, and afterwards
every KV block is free again (cached ones only evictable) and every codec-state slot is back."""
from __future__ import annotations

import dataclasses
import itertools

import pytest

from benchmarks.voice_prefix import synthetic_voice
from engine.errors import RequestRejected
from model.config import ModelConfig
from model.loader import load_family, load_frontend
from model.sampling import SamplingParams
from tests.engine.conftest import core_on_step_clock, drain, engine_config, wall_clock_capacity

BASE = "tiny-random-qwen3-base"
VOICES, REQUESTS, BURST = 20, 1000, 8
PARAMS = SamplingParams(temperature=0.0, max_tokens=2)
TEXTS = ("Hi.", "Good morning to you.", "Thanks, that is all.")


@pytest.fixture(scope="module")
def base(chorus_cache):
    config = ModelConfig(model=BASE, device="cpu", dtype="float32")
    return load_family(config), load_frontend(config)


def test_a_thousand_requests_over_twenty_voices_leave_every_block_free(base):
    family, frontend = base
    cloner = frontend.voice_cloner()
    voices = [cloner.clone(synthetic_voice(1.0 + 0.25 * i), "A voice that speaks." if i % 2 else None)
              for i in range(VOICES)]
    prompts = [frontend.prepare(text, f"v{i}", clone=voice)
               for i, voice in enumerate(voices) for text in TEXTS]
    config = engine_config(BASE, num_blocks=256, capacity=wall_clock_capacity(), max_num_seqs=BURST)
    config.cache = dataclasses.replace(config.cache, codec_state_slots=BURST)
    core = core_on_step_clock(config, family, step_cost=0.001, row_cost=0.001)
    order = itertools.cycle(range(len(prompts)))
    finished = refused = 0
    for burst in range(REQUESTS // BURST):
        ids = [f"b{burst}-{i}" for i in range(BURST)]
        for rid in ids:
            try:
                core.add_request(rid, prompts[next(order)], PARAMS)
            except RequestRejected:
                refused += 1
        core.step()
        if burst % 5 == 0:
            core.abort_request(ids[-1])  # mid-stream: its blocks and slot must come back too
        finished += len(drain(core))
    assert finished == REQUESTS and refused == 0
    assert core.stats.prefix_cache_hit_rate > 0.5  # the voices' prompts were shared
    assert core.kv_manager.num_free_blocks == core.kv_manager.num_blocks
    pool = core.audio.decoder.state_pool
    assert pool.num_free == pool.num_slots
