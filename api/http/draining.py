"""The shutdown drain: on SIGTERM the server stops taking speeches, lets the ones in flight
finish within a deadline, and ends those still running with an error before it exits.

`chorus serve` begins the drain from its signal handler (api/http/server.py); the routes ask
`check` before they start a speech and `register` each one they start, from its first segment's
preparation until it is closed (a speak-socket turn waiting for the one before it counts too).
"""
from __future__ import annotations

import asyncio
import logging
import time

from api.speech.synthesis import SegmentedSynthesis

logger = logging.getLogger("chorus.api")
# Seconds a client refused during a drain is told to wait (another replica, or this one restarted).
DRAIN_RETRY_AFTER_SECONDS = 5


class ShuttingDown(Exception):
    """The server is draining for shutdown and takes no new speech."""


class Drain:
    """Invariant: once `begin` has run, `draining` stays True and `check` refuses; every speech
    `register`ed is in `active` until it is closed; `until_done` returns once `active` is empty
    or its deadline passed, and then every speech still active has been failed: its queued
    audio dropped and an error put in its place, which its client reads next (one whose client
    does not read is cut when the server closes its connections)."""

    def __init__(self) -> None:
        self.draining = False
        self.active: set[SegmentedSynthesis] = set()
        self._changed = asyncio.Event()

    def begin(self) -> None:
        if not self.draining:
            self.draining = True
            logger.info("draining: no new speech; %d in flight", len(self.active))

    def check(self) -> None:
        if self.draining:
            raise ShuttingDown("The server is shutting down; retry on another server or shortly")

    def register(self, synthesis: SegmentedSynthesis) -> None:
        self.active.add(synthesis)
        synthesis.on_close.append(lambda: self._ended(synthesis))

    def _ended(self, synthesis: SegmentedSynthesis) -> None:
        self.active.discard(synthesis)
        self._changed.set()

    async def until_done(self, timeout: float) -> int:
        """Waits for the speeches in flight to end, at most `timeout` seconds; fails those
        left and returns how many there were."""
        deadline = time.monotonic() + timeout
        while self.active and (left := deadline - time.monotonic()) > 0:
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), left)
            except TimeoutError:
                break
        cut = list(self.active)
        for synthesis in cut:
            synthesis.fail("the server is shutting down and its drain timeout has passed")
        if cut:
            logger.warning("drain timeout: ended %d speech(es) still in flight", len(cut))
        return len(cut)
