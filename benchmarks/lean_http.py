"""The load generator's HTTP/1.1 client: asyncio streams and as little Python as a request needs.

The serving benchmark's client shares the two cores with the server it measures. With httpx, a
burst of 128 streamed POSTs cost the client so much that a bare uvicorn app answering every one
with an immediate 429 took 0.25 s at p99 to refuse them, against 0.08 s for as many bare GETs of
httpx's own (2-vCPU machine, 2026-12-08): the burst figures measured the client. Here a request
is one write of prebuilt bytes and its answer is read straight off the socket (Content-Length,
chunked, or until the connection closes), on connections kept alive between requests like any
HTTP client's.
"""
from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from typing import AsyncIterator
from urllib.parse import urlsplit

# A response's head is a few hundred bytes; one this large is not an HTTP server's.
MAX_HEAD_BYTES = 64 * 1024
READ_PIECE = 64 * 1024


class ResponseBody:
    """One response's status, headers (lower-case names) and body, read as it arrives. Invariant:
    `complete` is True only once the whole body has been read by its framing, and only then may
    its connection serve another request."""

    def __init__(self, reader: asyncio.StreamReader, status: int, headers: dict[str, str], bodiless: bool) -> None:
        self.status = status
        self.headers = headers
        self._reader = reader
        self.complete = bodiless
        self.length = None if bodiless or "chunked" in headers.get("transfer-encoding", "") else \
            int(headers["content-length"]) if "content-length" in headers else -1

    @property
    def reusable(self) -> bool:
        return self.complete and self.headers.get("connection", "").lower() != "close" and self.length != -1

    async def pieces(self) -> AsyncIterator[bytes]:
        """The body, as the socket gives it (chunked framing removed)."""
        if self.complete:
            return
        if self.length is None:
            async for piece in self._chunks():
                yield piece
        elif self.length >= 0:
            left = self.length
            while left:
                piece = await self._reader.read(min(READ_PIECE, left))
                if not piece:
                    raise asyncio.IncompleteReadError(b"", left)
                left -= len(piece)
                yield piece
        else:  # no framing: the body ends when the server closes the connection
            while piece := await self._reader.read(READ_PIECE):
                yield piece
        self.complete = True

    async def read(self) -> bytes:
        return b"".join([piece async for piece in self.pieces()])

    async def _chunks(self) -> AsyncIterator[bytes]:
        while True:
            size = int((await self._reader.readuntil(b"\r\n")).split(b";", 1)[0], 16)
            if size == 0:
                while await self._reader.readuntil(b"\r\n") != b"\r\n":  # trailers, then the blank line
                    pass
                return
            piece = await self._reader.readexactly(size)
            await self._reader.readexactly(2)
            yield piece


class LeanHttpClient:
    """HTTP/1.1 to one local server. Invariant: a connection goes back to the idle pool only after
    a response it carried was read to its end and did not ask to close; any other connection is
    closed when its request ends. A request sent on an idle connection that the server had already
    closed is sent once more on a new one (nothing of it had been answered)."""

    def __init__(self, base_url: str, connect_timeout_s: float, keep_alive: bool = True) -> None:
        parts = urlsplit(base_url)
        if parts.scheme != "http" or parts.hostname is None:
            raise ValueError(f"an http:// URL with a host is needed, got {base_url}")
        self.host, self.port = parts.hostname, parts.port or 80
        self.connect_timeout_s = connect_timeout_s
        self.keep_alive = keep_alive
        self._idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    @asynccontextmanager
    async def request(self, method: str, path: str, body: bytes = b"",
                      content_type: str = "application/json") -> AsyncIterator[ResponseBody]:
        """Sends the request and yields its response once its head has arrived."""
        head = (f"{method} {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\nAccept: */*\r\n"
                f"Connection: {'keep-alive' if self.keep_alive else 'close'}\r\n")
        if body or method in ("POST", "PUT", "PATCH"):
            head += f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
        message = head.encode("latin-1") + b"\r\n" + body
        reader, writer, response = await self._send(message, method == "HEAD")
        try:
            yield response
        finally:
            if self.keep_alive and response.reusable and not writer.is_closing():
                self._idle.append((reader, writer))
            else:
                writer.close()

    async def close(self) -> None:
        while self._idle:
            self._idle.pop()[1].close()

    async def _send(self, message: bytes, bodiless: bool):
        while self._idle:
            reader, writer = self._idle.pop()
            try:
                return reader, writer, await self._exchange(reader, writer, message, bodiless)
            except (ConnectionError, asyncio.IncompleteReadError):
                writer.close()  # closed by the server while idle: nothing was answered
        reader, writer = await asyncio.wait_for(asyncio.open_connection(self.host, self.port, limit=MAX_HEAD_BYTES),
                                                self.connect_timeout_s)
        try:
            return reader, writer, await self._exchange(reader, writer, message, bodiless)
        except BaseException:
            writer.close()
            raise

    @staticmethod
    async def _exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, message: bytes,
                        bodiless: bool) -> ResponseBody:
        writer.write(message)
        await writer.drain()
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            status = int(lines[0].split(" ", 2)[1])
            if status != 100:  # an interim "100 Continue" is followed by the answer
                break
        headers = {}
        for line in lines[1:]:
            if line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        return ResponseBody(reader, status, headers, bodiless or status in (204, 304) or 100 <= status < 200)
