"""uvicorn's protocols, HTTP/1.1 (h11) and WebSocket, with bounds on what a slow client can hold.

- uvicorn bounds an idle keep-alive connection but not one that sends its request line and
  headers a byte at a time: each such connection holds a socket and a protocol object for as
  long as its client likes (slowloris). A connection whose head is not complete within
  `head_timeout` seconds of the connection opening, or of the previous response ending, is closed.
- Linux grows a connection's send buffer to megabytes (tcp_wmem), and asyncio buffers 64 KiB
  more before it pauses a writer, so a client that reads slowly has seconds to minutes of audio
  parked in front of it, beyond the reach of the synthesis's backpressure (api/speech/backpressure.py),
  which also sees such a client's progress only in steps of that size. The kernel buffer is
  capped at `send_buffer_bytes` (which the kernel doubles) and asyncio's at the same: 96 KiB
  in all by default, about 2 s of 24 kHz pcm.
- A WebSocket whose client reads nothing cannot be closed politely (the close frame waits
  behind the unsent audio): once its app has returned it is reset after uvicorn's close grace
  (`BoundedWebSocketProtocol`), and a message too large is answered with a close frame the
  client gets to read.
"""
from __future__ import annotations

import asyncio
import socket
import struct

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

DEFAULT_HEAD_TIMEOUT_SECONDS = 10.0
DEFAULT_SEND_BUFFER_BYTES = 32 * 1024


class BoundedH11Protocol(H11Protocol):
    """Invariant: while the connection waits for a request head (h11's IDLE state on the client
    side), a timer runs that closes it after `head_timeout` seconds; any complete head stops it.
    The connection's kernel send buffer is at most `send_buffer_bytes` (doubled by the kernel),
    and its transport pauses the response's writer above that many bytes."""

    head_timeout = DEFAULT_HEAD_TIMEOUT_SECONDS
    send_buffer_bytes = DEFAULT_SEND_BUFFER_BYTES

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.send_buffer_bytes)
        transport.set_write_buffer_limits(high=self.send_buffer_bytes, low=self.send_buffer_bytes // 4)
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


def bounded_h11(head_timeout: float = DEFAULT_HEAD_TIMEOUT_SECONDS,
                send_buffer_bytes: int = DEFAULT_SEND_BUFFER_BYTES) -> type[BoundedH11Protocol]:
    """The protocol class (for uvicorn's `http=`) with these bounds."""
    if not head_timeout > 0 or send_buffer_bytes < 4096:
        raise ValueError("the head timeout must be > 0 s and the send buffer >= 4096 bytes")
    return type("BoundedH11Protocol", (BoundedH11Protocol,),
                {"head_timeout": head_timeout, "send_buffer_bytes": send_buffer_bytes})


class BoundedWebSocketProtocol(WebSocketsSansIOProtocol):
    """uvicorn's WebSocket protocol (websockets' sans-I/O one, its default) with an end that a
    client cannot hold off, and that tells it why. uvicorn closes a connection once its send
    buffer has drained, which for a client that reads nothing is never: its socket, buffers and
    file descriptor would stay for as long as that client likes. Invariant: a connection whose
    app has returned, or that failed (a message over `ws_max_size`), is gone within
    `close_timeout` seconds (uvicorn's grace for the close handshake), reset if it has not
    closed by then."""

    async def run_asgi(self) -> None:
        await super().run_asgi()
        if not self.disconnected:
            self.loop.call_later(self.close_timeout, self._abort)

    def handle_parser_exception(self) -> None:
        """The client broke the protocol (a message too big): websockets has failed the
        connection with a close frame. uvicorn closes the socket at once, while the client may
        still be sending the rest of that message, and a socket closed with data unread is reset:
        the reset can overtake the close frame, and the client never learns why. Here, as
        websockets intends, the close frame is followed by a FIN, and what the client still sends
        is read and discarded until it closes, for `close_timeout` at most."""
        if self.close_sent:
            return  # answered already (websockets keeps the exception, and discards what comes)
        closing = self.conn.close_sent
        self.queue.put_nowait({"type": "websocket.disconnect", "code": closing.code, "reason": closing.reason})
        self.transport.write(b"".join(self.conn.data_to_send()))
        self.close_sent = True
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.close_timer = self.loop.call_later(self.close_timeout, self._abort)  # run_asgi leaves it be

    def _abort(self) -> None:
        if self.disconnected:
            return
        # NOTE: a socket closed with unsent data lingers in the kernel (FIN_WAIT1, its buffer
        # held) for as long as the client keeps its window shut; with linger 0 it is reset.
        sock = self.transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.transport.abort()
