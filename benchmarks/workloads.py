"""Closed-loop, paced-listener, Poisson and burst load against a driver; every request's trace is kept.

A run stops by itself: clients stop sending at `duration_s`, requests still open `drain_s`
later are cancelled and count as failed, as client timeouts (their audio did not arrive in time
anyway).
"""
from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass
from typing import Callable, Iterator

from benchmarks.corpus import BenchRequest
from benchmarks.drivers import Driver
from benchmarks.trace import RequestTrace


@dataclass(slots=True)
class RunResult:
    """All requests sent during one load level, and the wall time from first send to last end."""

    traces: list[RequestTrace]
    wall_seconds: float


async def _measure(driver: Driver, request: BenchRequest, traces: list[RequestTrace],
                   on_done: Callable[[], None]) -> RequestTrace:
    trace = RequestTrace(sent=time.monotonic(), sample_rate=driver.sample_rate)
    traces.append(trace)
    try:
        await driver.run(request, trace)
    except asyncio.CancelledError:
        trace.fail("timeout")
        raise
    except Exception:  # noqa: BLE001 - a failed request is a data point, not the end of the run
        trace.fail("other")
    on_done()
    return trace


def retry_after_seconds(trace: RequestTrace) -> float:
    """How long a refused client waits before its next request: the server's Retry-After in
    seconds (an HTTP date, or no header, means no wait)."""
    try:
        return max(0.0, float(trace.retry_after)) if trace.retry_after is not None else 0.0
    except ValueError:
        return 0.0


async def _finish(tasks: list[asyncio.Task], started: float, traces: list[RequestTrace], stop_at: float) -> RunResult:
    if tasks:
        _, pending = await asyncio.wait(tasks, timeout=max(0.0, stop_at - time.monotonic()))
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
    return RunResult(traces, time.monotonic() - started)


async def closed_loop(driver: Driver, requests: Iterator[BenchRequest], concurrency: int, duration_s: float,
                      drain_s: float, on_done: Callable[[], None] = lambda: None) -> RunResult:
    """`concurrency` clients, each sending its next request as soon as the last one ended; a
    refused client first waits as long as Retry-After says, as an OpenAI client does (without
    it, refused clients would spin and the run would measure how fast 429s can be sent)."""
    traces: list[RequestTrace] = []
    started = time.monotonic()

    async def client() -> None:
        while time.monotonic() < started + duration_s:
            trace = await _measure(driver, next(requests), traces, on_done)
            if not trace.admitted:
                await asyncio.sleep(min(retry_after_seconds(trace), max(0.0, started + duration_s - time.monotonic())))

    tasks = [asyncio.create_task(client()) for _ in range(concurrency)]
    return await _finish(tasks, started, traces, started + duration_s + drain_s)


async def poisson(driver: Driver, requests: Iterator[BenchRequest], rate: float, duration_s: float,
                  drain_s: float, seed: int = 0, on_done: Callable[[], None] = lambda: None) -> RunResult:
    """Requests arrive at exponential intervals with mean 1 / `rate` for `duration_s`."""
    rng = random.Random(seed)
    traces: list[RequestTrace] = []
    tasks: list[asyncio.Task] = []
    started = time.monotonic()
    offset = rng.expovariate(rate)
    while offset < duration_s:
        await asyncio.sleep(max(0.0, started + offset - time.monotonic()))
        tasks.append(asyncio.create_task(_measure(driver, next(requests), traces, on_done)))
        offset += rng.expovariate(rate)
    return await _finish(tasks, started, traces, started + duration_s + drain_s)


async def burst(driver: Driver, requests: Iterator[BenchRequest], count: int, drain_s: float,
                on_done: Callable[[], None] = lambda: None) -> RunResult:
    """`count` requests sent at the same instant, then at most `drain_s` for them to finish."""
    traces: list[RequestTrace] = []
    started = time.monotonic()
    tasks = [asyncio.create_task(_measure(driver, next(requests), traces, on_done)) for _ in range(count)]
    return await _finish(tasks, started, traces, started + drain_s)


async def paced(driver: Driver, requests: Iterator[BenchRequest], listeners: int, duration_s: float, drain_s: float,
                spread_s: float, seed: int = 0, on_done: Callable[[], None] = lambda: None) -> RunResult:
    """`listeners` clients that each listen to their reply before asking for the next, as the
    callers of a voice agent do: each starts at a random moment in the first `spread_s`
    seconds, and sends its next request once the audio of the last has played out (in real time
    from its first byte); a refused or failed request is followed at once (after Retry-After)."""
    rng = random.Random(seed)
    traces: list[RequestTrace] = []
    started = time.monotonic()
    ends = started + duration_s

    async def listener(offset: float) -> None:
        await asyncio.sleep(offset)
        while time.monotonic() < ends:
            trace = await _measure(driver, next(requests), traces, on_done)
            if trace.ok and trace.first_audio_at is not None:
                played_out = trace.first_audio_at + trace.audio_seconds
            else:
                played_out = time.monotonic() + retry_after_seconds(trace)
            await asyncio.sleep(max(0.0, min(played_out, ends) - time.monotonic()))

    tasks = [asyncio.create_task(listener(rng.uniform(0.0, spread_s))) for _ in range(listeners)]
    return await _finish(tasks, started, traces, ends + drain_s)
