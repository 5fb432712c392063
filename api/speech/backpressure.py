"""Backpressure: an engine request stops generating while its audio waits for a client that
is far behind.

A response's audio waits in the synthesis's queues while the client does not read (the socket's
buffers full, the body's `send` blocked). Without a bound the engine would make a whole long
speech for a client reading 1 KB every few seconds, and park it in memory. So an engine request
with more than `limit_seconds` of audio waiting is paused (it keeps its KV blocks and takes no
step) until half of that has been taken. Each request is judged by its own queue: the next
segment, which runs ahead of the one playing, stops `limit_seconds` ahead, while the one the
client is reading is never paused for audio queued behind it. A client that takes nothing for
`stall_seconds` while a request is paused (checked every `stall_seconds`: so after one to two
times that) is given up on. (The buffers in front of the client
are bounded separately: api/http/protocol.py.)
"""
from __future__ import annotations

import asyncio
import logging
from typing import Callable

from engine.client import EngineClient

logger = logging.getLogger("chorus.api")


class ClientBacklog:
    """The audio of one speech's engine requests made but not yet taken by its client.
    Invariant: a request is paused exactly while its waiting audio, having passed
    `limit_seconds`, has not yet fallen below half of it; while any is paused, `on_stall` is
    asked each time `stall_seconds` pass with nothing taken, until it acts (returns True)."""

    def __init__(self, client: EngineClient, sample_rate: int, limit_seconds: float, stall_seconds: float,
                 on_stall: Callable[[], bool]) -> None:
        self._client = client
        self._limit = round(limit_seconds * sample_rate)
        self._stall_seconds = stall_seconds
        self._on_stall = on_stall
        self._waiting: dict[str, int] = {}  # request → samples made, not yet taken
        self._paused: set[str] = set()
        self._taken = 0  # chunks taken so far: a stall is a pause in which this does not move
        self._timer: asyncio.TimerHandle | None = None

    def added(self, request_id: str, samples: int) -> None:
        waiting = self._waiting[request_id] = self._waiting.get(request_id, 0) + samples
        if waiting > self._limit and request_id not in self._paused:
            self._paused.add(request_id)
            self._client.pause(request_id, True)
            if self._timer is None:
                self._watch()

    def taken(self, request_id: str, samples: int) -> None:
        waiting = self._waiting[request_id] = self._waiting.get(request_id, 0) - samples
        self._taken += 1
        if request_id in self._paused and waiting < self._limit // 2:
            self._paused.discard(request_id)
            self._client.pause(request_id, False)

    def ended(self, request_id: str) -> None:
        """The request's last chunk is queued: it makes no more audio (what waits stays counted)."""
        self._paused.discard(request_id)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _watch(self) -> None:
        self._timer = asyncio.get_running_loop().call_later(self._stall_seconds, self._check, self._taken)

    def _check(self, taken: int) -> None:
        self._timer = None
        if not self._paused:
            return
        if self._taken == taken and self._on_stall():
            logger.info("a client took no audio for %.0f s of backpressure; gave up on it", self._stall_seconds)
            return
        self._watch()  # the client still reads, slowly (or is not its turn yet): keep watching
