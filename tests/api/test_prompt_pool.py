"""The prompt-preparation pool: order of need, cancellation, failures reaching their awaiter, metrics."""
from __future__ import annotations

import asyncio
import threading

import pytest

from api.http.metrics import PromptPoolMetrics
from api.speech.prompt_pool import PromptPool
from api.speech.voice_choice import VoiceChoice
from model.families.base import SpeechPrompt, VoiceNotFoundError

V = VoiceChoice("v")


class GatedPrepare:
    """A front end's `prepare` that records the texts it runs, in order, and holds the worker on
    "gate" until `release` (so jobs pile up behind it)."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        self.gate_entered = threading.Event()
        self._open = threading.Event()

    def release(self) -> None:
        self._open.set()

    def __call__(self, text: str, voice: str, speed: float, max_tokens: int | None = None, *,
                 language: str | None = None, instructions: str | None = None) -> SpeechPrompt:
        if text == "gate":
            self.gate_entered.set()
            self._open.wait(10)
        if text == "bad voice":
            raise VoiceNotFoundError(voice, ("joe",))
        if text == "...":
            raise ValueError("nothing to speak in '...'")
        self.ran.append(text)
        return SpeechPrompt(token_ids=[len(text)])


async def hold_worker(pool: PromptPool, prepare: GatedPrepare) -> asyncio.Future:
    gate = pool.submit("gate", V, 1.0, arrival=pool.next_arrival(), index=0, first=True)
    await asyncio.to_thread(prepare.gate_entered.wait, 10)
    return gate


def sample(metrics: PromptPoolMetrics, name: str, kind: str) -> float | None:
    return metrics.registry.get_sample_value(name, {"kind": kind})


def test_first_segments_run_before_later_ones_in_arrival_order_and_later_ones_by_need():
    prepare = GatedPrepare()

    async def main():
        async with PromptPool(prepare, workers=1, metrics=PromptPoolMetrics()) as pool:
            gate = await hold_worker(pool, prepare)
            early, middle, late = (pool.next_arrival() for _ in range(3))
            jobs = [
                pool.submit("late 2", V, 1.0, arrival=late, index=2, first=False),
                pool.submit("early 3", V, 1.0, arrival=early, index=3, first=False),
                pool.submit("early 1", V, 1.0, arrival=early, index=1, first=False),
                pool.submit("middle first", V, 1.0, arrival=middle, index=0, first=True),
                pool.submit("late first", V, 1.0, arrival=late, index=0, first=True),
                pool.submit("early first", V, 1.0, arrival=early, index=0, first=True),
            ]
            prepare.release()
            await asyncio.gather(gate, *jobs)

    asyncio.run(main())
    assert prepare.ran == ["gate", "early first", "middle first", "late first", "early 1", "early 3", "late 2"]


def test_a_cancelled_job_leaves_the_queue_and_a_running_ones_result_is_dropped():
    prepare = GatedPrepare()
    metrics = PromptPoolMetrics()

    async def main():
        async with PromptPool(prepare, workers=1, metrics=metrics) as pool:
            gate = await hold_worker(pool, prepare)
            arrival = pool.next_arrival()
            kept = pool.submit("kept", V, 1.0, arrival=arrival, index=1, first=False)
            dropped = pool.submit("dropped", V, 1.0, arrival=arrival, index=2, first=False)
            assert sample(metrics, "chorus_prompt_queue_depth", "later") == 2
            dropped.cancel()
            await asyncio.sleep(0)
            assert sample(metrics, "chorus_prompt_queue_depth", "later") == 1
            gate.cancel()  # running: it finishes on its thread, nobody gets its result
            prepare.release()
            assert (await kept).token_ids == [4]
            return gate

    gate = asyncio.run(main())
    assert prepare.ran == ["gate", "kept"] and gate.cancelled()


def test_failures_reach_the_awaiting_caller():
    prepare = GatedPrepare()

    async def main():
        async with PromptPool(prepare, workers=1) as pool:
            arrival = pool.next_arrival()
            with pytest.raises(VoiceNotFoundError):
                await pool.submit("bad voice", VoiceChoice("nobody"), 1.0, arrival=arrival, index=0, first=True)
            with pytest.raises(ValueError, match="nothing to speak"):
                await pool.submit("...", V, 1.0, arrival=arrival, index=1, first=False)
            # The worker survives both.
            return await pool.submit("fine", V, 1.0, arrival=arrival, index=2, first=False)

    assert asyncio.run(main()).token_ids == [4]


def test_metrics_count_depth_wait_and_preparation_by_kind():
    prepare = GatedPrepare()
    metrics = PromptPoolMetrics()

    async def main():
        async with PromptPool(prepare, workers=1, metrics=metrics) as pool:
            gate = await hold_worker(pool, prepare)
            arrival = pool.next_arrival()
            jobs = [pool.submit(f"later {i}", V, 1.0, arrival=arrival, index=i + 1, first=False) for i in range(3)]
            jobs.append(pool.submit("first", V, 1.0, arrival=pool.next_arrival(), index=0, first=True))
            assert sample(metrics, "chorus_prompt_queue_depth", "later") == 3
            assert sample(metrics, "chorus_prompt_queue_depth", "first") == 1
            prepare.release()
            await asyncio.gather(gate, *jobs)

    asyncio.run(main())
    for kind, count in (("first", 2), ("later", 3)):  # the gate is a first segment too
        assert sample(metrics, "chorus_prompt_queue_depth", kind) == 0
        assert sample(metrics, "chorus_prompt_wait_seconds_count", kind) == count
        assert sample(metrics, "chorus_prompt_prepare_seconds_count", kind) == count


def test_later_segments_leave_a_worker_free_for_a_first_one():
    """Two workers: while a later segment runs, a second later one waits, and a first segment
    that arrives meanwhile starts at once."""
    prepare = GatedPrepare()

    async def main():
        async with PromptPool(prepare, workers=2, metrics=PromptPoolMetrics()) as pool:
            speech = pool.next_arrival()
            held = pool.submit("gate", V, 1.0, arrival=speech, index=1, first=False)
            await asyncio.to_thread(prepare.gate_entered.wait, 10)
            waiting = pool.submit("later 2", V, 1.0, arrival=speech, index=2, first=False)
            await asyncio.sleep(0.05)
            assert not waiting.done()  # the other worker is kept for first segments
            first = pool.submit("new first", V, 1.0, arrival=pool.next_arrival(), index=0, first=True)
            await asyncio.wait_for(first, 5)
            assert not waiting.done()
            prepare.release()
            await asyncio.gather(held, waiting)

    asyncio.run(main())
    assert prepare.ran == ["new first", "gate", "later 2"]


def test_the_heap_is_given_back_each_time_the_pool_goes_idle_and_never_while_jobs_wait(monkeypatch):
    import api.speech.prompt_pool

    prepare = GatedPrepare()
    trims: list[list[str]] = []  # what had run by each trim
    monkeypatch.setattr(api.speech.prompt_pool, "give_back_memory", lambda: trims.append(list(prepare.ran)))

    async def main():
        async with PromptPool(prepare, workers=1, metrics=PromptPoolMetrics()) as pool:
            gate = await hold_worker(pool, prepare)
            queued = [pool.submit(text, V, 1.0, arrival=pool.next_arrival(), index=0, first=True)
                      for text in ("one", "two")]
            prepare.release()
            await asyncio.gather(gate, *queued)
            await asyncio.sleep(0.05)  # the trim runs on the pool's thread
            alone = pool.submit("three", V, 1.0, arrival=pool.next_arrival(), index=0, first=True)
            await alone
            await asyncio.sleep(0.05)

    asyncio.run(main())
    assert trims == [["gate", "one", "two"], ["gate", "one", "two", "three"]]


def test_giving_back_the_heap_works_on_this_c_library():
    from api.http.heap import give_back_memory

    assert give_back_memory()  # glibc on every machine this project runs on
