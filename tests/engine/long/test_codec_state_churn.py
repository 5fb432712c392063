"""After 1,000 Qwen3-TTS requests (finished, aborted mid-stream, and refused), every codec-state
slot and every KV block is free again."""
from __future__ import annotations

from engine.errors import RequestRejected
from tests.engine.test_codec_state_slots import PARAMS, SLOTS, make_core, qwen3  # noqa: F401 - fixture
from tests.engine.conftest import drain, wall_clock_capacity


def test_a_thousand_requests_leave_every_slot_and_block_free(qwen3):  # noqa: F811 - the fixture
    family, frontend = qwen3
    core = make_core(family, wall_clock_capacity())
    prompt = frontend.prepare("Hi.", "ryan")
    finished = refused = 0
    for burst in range(1000 // (SLOTS + 1)):
        ids = [f"b{burst}-{i}" for i in range(SLOTS + 1)]
        for rid in ids:
            try:
                core.add_request(rid, prompt, PARAMS)
            except RequestRejected:
                refused += 1
        core.step()
        if burst % 3 == 0:
            core.abort_request(ids[0])  # mid-stream: its slot must come back too
        finished += len(drain(core))
    pool = core.audio.decoder.state_pool
    assert finished + refused == 1000 - 1000 % (SLOTS + 1) and refused == 1000 // (SLOTS + 1)
    assert pool.num_free == pool.num_slots == SLOTS
    assert core.kv_manager.num_free_blocks == core.kv_manager.num_blocks
