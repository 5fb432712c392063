"""`chorus serve`'s uvicorn server: a SIGTERM (or Ctrl-C) drains before the server exits.

uvicorn alone closes its listener at once, waits for responses without a bound, lets
sse-starlette cut event streams mid-body, and re-raises the signal so the process ends by it.
Here the first signal begins the app's drain (api/http/draining.py: /ready 503, new speech 503 with
Retry-After, speeches in flight finish or are ended with an error after `drain_timeout`), and
only then does uvicorn shut down, exiting 0. A second signal exits at once, as uvicorn's does.

Under `chorus serve`'s supervisor (api/http/supervisor.py) the server listens on the sockets it
was handed and reports when it serves. A signal to the whole process group (Ctrl-C in a terminal,
systemd stopping its unit) arrives twice, directly and passed on by the supervisor: a signal
within `_ECHO_SECONDS` of the first is that one again, not the second.
"""
from __future__ import annotations

import asyncio
import logging
import time
from types import FrameType
from typing import Callable

import uvicorn
from fastapi import FastAPI

logger = logging.getLogger("chorus.api")
# After the drain, how long uvicorn waits for connections to close before cancelling them.
_CLOSE_SECONDS = 5.0
# A speech ended by the drain needs a moment to send its error and close its response.
_ENDED_SECONDS = 2.0
_ECHO_SECONDS = 1.0


class DrainingServer(uvicorn.Server):
    """Invariant: the server's loop is told to exit only after the app's drain has ended (every
    speech finished or failed), or on a second signal; `on_started` runs once it serves."""

    def __init__(self, config: uvicorn.Config, app: FastAPI, drain_timeout: float,
                 on_started: Callable[[], None] = lambda: None) -> None:
        config.timeout_graceful_shutdown = _CLOSE_SECONDS
        super().__init__(config)
        self.app = app
        self.drain_timeout = drain_timeout
        self.on_started = on_started
        self._loop: asyncio.AbstractEventLoop | None = None
        self._draining: asyncio.Task | None = None
        self._first_signal_at: float | None = None

    async def serve(self, sockets=None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().serve(sockets)

    async def startup(self, sockets=None) -> None:
        await super().startup(sockets)
        if self.started:
            self.on_started()

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        now = time.monotonic()
        if self._first_signal_at is not None and now - self._first_signal_at < _ECHO_SECONDS:
            return
        self._first_signal_at = self._first_signal_at or now
        drain = getattr(self.app.state, "drain", None)
        if self._loop is None or drain is None or drain.draining or self.should_exit:
            super().handle_exit(sig, frame)  # not started yet, or a second signal: exit now
            return
        logger.info("signal %d: draining for up to %.0f s (signal again to exit now)", sig, self.drain_timeout)
        drain.begin()
        self._loop.call_soon_threadsafe(self._start_drain)

    def _start_drain(self) -> None:
        self._draining = asyncio.ensure_future(self._drain_then_exit())

    async def _drain_then_exit(self) -> None:
        drain = self.app.state.drain
        if await drain.until_done(self.drain_timeout):
            await drain.until_done(_ENDED_SECONDS)
        self.should_exit = True
