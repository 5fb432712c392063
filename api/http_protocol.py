"""uvicorn's HTTP/1.1 protocol (h11) with a deadline on every request head.

uvicorn bounds an idle keep-alive connection but not one that sends its request line and
headers a byte at a time: each such connection holds a socket and a protocol object for as long
as its client likes (slowloris). This closes a connection whose head is not complete within
`head_timeout` seconds of the connection opening, or of the previous response ending.
"""
from __future__ import annotations

import asyncio

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

DEFAULT_HEAD_TIMEOUT_SECONDS = 10.0


class H11WithHeadTimeout(H11Protocol):
    """Invariant: while the connection waits for a request head (h11's IDLE state on the client
    side), a timer runs that closes it after `head_timeout` seconds; any complete head stops it."""

    head_timeout = DEFAULT_HEAD_TIMEOUT_SECONDS

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._head_timer: asyncio.TimerHandle | None = None
        self._arm_head_timer()

    def handle_events(self) -> None:
        super().handle_events()
        if self.conn.their_state is not h11.IDLE:
            self._disarm_head_timer()  # a whole head has arrived

    def on_response_complete(self) -> None:
        # Armed first: the next pipelined request, if it is already here, disarms it.
        self._arm_head_timer()
        super().on_response_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_head_timer()
        super().connection_lost(exc)

    def _arm_head_timer(self) -> None:
        self._disarm_head_timer()
        self._head_timer = self.loop.call_later(self.head_timeout, self._head_too_slow)

    def _disarm_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_too_slow(self) -> None:
        self._head_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.logger.info("closing a connection whose request head took over %.0f s", self.head_timeout)
            self.transport.close()


def with_head_timeout(seconds: float) -> type[H11WithHeadTimeout]:
    """The protocol class (for uvicorn's `http=`) with its head deadline set to `seconds`."""
    if not seconds > 0:
        raise ValueError(f"the head timeout must be > 0 seconds, got {seconds}")
    return type("H11WithHeadTimeout", (H11WithHeadTimeout,), {"head_timeout": seconds})
