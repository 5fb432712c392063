"""Closed-loop, paced-listener, Poisson and burst load against a driver; every request's trace is kept.

A level of clients (closed loop, paced listeners) runs on its own clock (`LevelTiming`):

    | ramp (the warm-up)      | measured window                         | drain              |
    | each client starts at a | every client keeps sending; the level's | nothing is sent;   |
    | random moment in it     | figures count the requests sent in here | open requests end  |

so that every client holds its load through the whole window: all of a paced level's listeners
have arrived before it opens. A client *holds load* from sending a request until it may send its
next (`ClientLevel.held`): while the request is in flight, while a listener plays its reply, and
while a refused client waits as Retry-After says. Requests sent in the ramp are kept, not counted.

Poisson arrivals and bursts have no window: every request counts. Every run stops by itself:
requests still open `drain_s` after the last may be sent are cancelled and count as failed, as
client timeouts (their audio did not arrive in time anyway).
"""
from __future__ import annotations

import argparse
import asyncio
import random
import time
from dataclasses import dataclass
from typing import Callable, Iterator

from benchmarks.corpus import BenchRequest
from benchmarks.drivers import Driver
from benchmarks.trace import RequestTrace, Window


@dataclass(frozen=True, slots=True)
class LevelTiming:
    """A level of clients' clock, in seconds from its start: clients start at random moments in
    [0, ramp_s), send while it is before ramp_s + window_s, and the measured window is
    [ramp_s, ramp_s + window_s); requests still open drain_s after the window are cancelled.
    Invariant: ramp_s ≥ 0, window_s > 0, drain_s ≥ 0."""

    ramp_s: float
    window_s: float
    drain_s: float

    def __post_init__(self) -> None:
        if self.ramp_s < 0 or not self.window_s > 0 or self.drain_s < 0:
            raise ValueError(f"a level needs ramp_s >= 0, window_s > 0 and drain_s >= 0, got {self}")

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> LevelTiming:
        return cls(args.ramp_seconds, args.level_seconds, args.drain_seconds)

    def window(self, started: float) -> Window:
        return Window(started + self.ramp_s, started + self.ramp_s + self.window_s)


def add_level_args(parser: argparse.ArgumentParser) -> None:
    """`LevelTiming`'s flags, as the benchmarks that run levels of clients take them."""
    parser.add_argument("--ramp-seconds", type=float, default=4.0,
                        help="the warm-up: a level's clients start at random moments within it; its requests are "
                             "kept in the JSON, not counted")
    parser.add_argument("--level-seconds", type=float, default=30.0,
                        help="the measured window after the warm-up: every client keeps sending, and the figures "
                             "count the requests sent in it (Poisson levels: how long requests arrive)")
    parser.add_argument("--drain-seconds", type=float, default=15.0,
                        help="then how long open requests may finish (later: client timeouts)")


@dataclass(frozen=True, slots=True)
class ClientLevel:
    """A level as it ran: `clients` clients on `timing`'s clock from `started`, each sending its
    next request at `next_send(its last trace)` (at once when that has passed) while the window is
    open. Invariant: a client has one request out at a time and sends its next no earlier than
    `held` says, so the stretches its traces held never overlap and their count at any moment is
    the number of clients holding load."""

    clients: int
    started: float
    timing: LevelTiming
    next_send: Callable[[RequestTrace], float]

    @property
    def window(self) -> Window:
        return self.timing.window(self.started)

    def held(self, trace: RequestTrace) -> tuple[float, float]:
        """The stretch in which the client that sent `trace` held load for it: from its send to
        when it could send again (a stream that stalled past its playback: when it ended)."""
        return trace.sent, max(trace.ended_at, self.next_send(trace))


@dataclass(slots=True)
class RunResult:
    """All requests sent during one load level, and the wall time from first send to last end;
    `level`: how a level of clients ran (None: Poisson arrivals or a burst, every request counts)."""

    traces: list[RequestTrace]
    wall_seconds: float
    level: ClientLevel | None = None


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
    finally:
        trace.ended_at = time.monotonic()
    on_done()
    return trace


def retry_after_seconds(trace: RequestTrace) -> float:
    """How long a refused client waits before its next request: the server's Retry-After in
    seconds (an HTTP date, or no header, means no wait)."""
    try:
        return max(0.0, float(trace.retry_after)) if trace.retry_after is not None else 0.0
    except ValueError:
        return 0.0


def closed_loop_next_send(trace: RequestTrace) -> float:
    """A closed-loop client's next request: as soon as the last ended, or as long after it as
    Retry-After says (without the wait, refused clients would spin and the run would measure how
    fast 429s can be sent)."""
    return trace.ended_at + retry_after_seconds(trace)


def listener_next_send(trace: RequestTrace) -> float:
    """A listener's next request: once the reply has played out, in real time from its first
    byte; a refused or failed request is followed as a closed-loop client follows it."""
    if trace.ok and trace.first_audio_at is not None:
        return trace.first_audio_at + trace.audio_seconds
    return closed_loop_next_send(trace)


async def _finish(tasks: list[asyncio.Task], started: float, traces: list[RequestTrace], stop_at: float,
                  level: ClientLevel | None = None) -> RunResult:
    if tasks:
        _, pending = await asyncio.wait(tasks, timeout=max(0.0, stop_at - time.monotonic()))
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
    return RunResult(traces, time.monotonic() - started, level)


async def _clients(driver: Driver, requests: Iterator[BenchRequest], count: int, timing: LevelTiming, seed: int,
                   on_done: Callable[[], None], next_send: Callable[[RequestTrace], float]) -> RunResult:
    """`count` clients on `timing`'s clock, each following `next_send` after each of its requests."""
    rng = random.Random(seed)
    traces: list[RequestTrace] = []
    level = ClientLevel(count, time.monotonic(), timing, next_send)
    ends = level.window.end

    async def client(offset: float) -> None:
        await asyncio.sleep(offset)
        while time.monotonic() < ends:
            trace = await _measure(driver, next(requests), traces, on_done)
            await asyncio.sleep(max(0.0, min(next_send(trace), ends) - time.monotonic()))

    tasks = [asyncio.create_task(client(rng.uniform(0.0, timing.ramp_s))) for _ in range(count)]
    return await _finish(tasks, level.started, traces, ends + timing.drain_s, level)


async def closed_loop(driver: Driver, requests: Iterator[BenchRequest], concurrency: int, timing: LevelTiming,
                      seed: int = 0, on_done: Callable[[], None] = lambda: None) -> RunResult:
    """`concurrency` clients, each sending its next request as soon as the last one ended; a
    refused client first waits as long as Retry-After says, as an OpenAI client does."""
    return await _clients(driver, requests, concurrency, timing, seed, on_done, closed_loop_next_send)


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


async def paced(driver: Driver, requests: Iterator[BenchRequest], listeners: int, timing: LevelTiming,
                seed: int = 0, on_done: Callable[[], None] = lambda: None) -> RunResult:
    """`listeners` clients that each listen to their reply before asking for the next, as the
    callers of a voice agent do: each sends its next request once the audio of the last has played
    out (in real time from its first byte); a refused or failed request is followed at once (after
    Retry-After)."""
    return await _clients(driver, requests, listeners, timing, seed, on_done, listener_next_send)
