"""EngineClient with the core in a thread (its own process: tests/engine/live/test_client_process.py).

The core runs on the wall clock here, on a machine that steps tiny-random far slower than real
time: tests of the client's plumbing leave admission off (engine_config's `wall_clock_capacity`:
they are about streams, aborts and errors, whatever the load); admission's own tests run on a
fake clock (test_admission_core.py).
"""
from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

from engine.client import EngineClient
from engine.errors import RequestRejected
from engine.outputs import EngineLimits
from model.families.base import VoiceNotFoundError
from model.sampling import SamplingParams

from .conftest import engine_config, wall_clock_capacity


def run(coro):
    return asyncio.run(coro)


async def collect(client: EngineClient, text: str, max_tokens: int, seed: int):
    chunks = []
    async for chunk in client.synthesize(text, "tara", SamplingParams(seed=seed, max_tokens=max_tokens)):
        chunks.append(chunk)
    return chunks


async def until(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    """Waits (polling) until `condition()` holds; fails after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting for the engine"
        await asyncio.sleep(0.02)


def check_concurrent_requests_stream_in_order_and_finish_once(tiny_model: str, mode: str) -> None:
    """Six requests at once through a client in `mode`: each streams its audio in order and ends
    once; the stats then say every block is free again."""
    async def main():
        async with EngineClient(engine_config(tiny_model, mode=mode)) as client:
            assert client.is_ready
            results = await asyncio.gather(*(collect(client, f"hello {i}", 42, i) for i in range(6)))
            # The next stats report (every STATS_INTERVAL_S) counts all of it.
            await until(lambda: client.stats.tokens_generated >= 6 * 42 and client.stats.kv_blocks_used == 0)
            if client.core_pid is not None:
                # The core names itself, so ps and py-spy show what it is.
                cmdline = Path(f"/proc/{client.core_pid}/cmdline").read_bytes()
                assert cmdline.startswith(b"chorus-engine-core"), cmdline
            return results, client.stats, client.core_pid

    results, stats, pid = run(main())
    assert (pid is not None) == (mode == "process") and pid != os.getpid()
    for chunks in results:
        assert [c.finished for c in chunks].count(True) == 1 and chunks[-1].finished
        assert chunks[-1].finish_reason == "length"
        audio = np.concatenate([c.pcm for c in chunks])
        assert len(audio) == 6 * 2048  # 42 constrained tokens = 6 frames
        metrics = chunks[-1].metrics
        assert metrics.output_tokens == 42
        assert 0 < metrics.time_to_first_audio <= metrics.total_time
    assert stats.kv_blocks_used == 0 and stats.tokens_generated >= 6 * 42


def test_concurrent_requests_stream_in_order_and_finish_once(tiny_model):
    check_concurrent_requests_stream_in_order_and_finish_once(tiny_model, "inproc")


def test_the_ready_engines_stats_already_say_its_room(tiny_model):
    """The API refuses early on the engine's room report: the first one comes with readiness, not
    a quarter of a second later (the default, no room, refused a speech that came before it)."""
    async def main():
        async with EngineClient(engine_config(tiny_model, capacity=wall_clock_capacity(max_queue_delay=1.0))) as client:
            return client.stats.room.now, client.stats.room.taken_at

    room, taken_at = run(main())
    assert room > 0 and taken_at > 0


def test_leaving_the_stream_early_aborts_and_frees_blocks(tiny_model):
    async def main():
        async with EngineClient(engine_config(tiny_model)) as client:
            async for chunk in client.synthesize("long one", "tara", SamplingParams(max_tokens=3000)):
                if len(chunk.pcm):
                    break
            await until(lambda: client.stats.num_running == 0 and client.stats.kv_blocks_used == 0)
            return client.stats

    stats = run(main())
    assert stats.num_running == 0 and stats.kv_blocks_used == 0
    assert stats.finished_by_reason.get("abort") == 1


def test_rejections_reach_the_caller(tiny_model):
    async def main():
        async with EngineClient(engine_config(tiny_model, num_blocks=16, max_num_batched_tokens=64)) as client:
            # The ready message carries the core's limits: its KV pool, and 7 tokens per SNAC frame.
            assert client.limits == EngineLimits(context_tokens=16 * 16, outputs_per_second=7 * 24000 / 2048)
            with pytest.raises(VoiceNotFoundError):
                await collect_voice(client, "nobody")
            with pytest.raises(RequestRejected) as info:
                await collect(client, "x" * 400, 7, 0)  # 16 blocks x 16 = 256 tokens
            assert info.value.code == "context_length_exceeded"
            ok = await collect(client, "still fine", 7, 1)
            assert ok[-1].finish_reason == "length"

    async def collect_voice(client, voice):
        async for _ in client.synthesize("hi", voice):
            pass

    run(main())
