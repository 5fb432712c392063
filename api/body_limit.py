"""Refuses request bodies above a size limit with 413, and bodies that arrive too slowly with
408, before any handler parses them."""
from __future__ import annotations

import asyncio
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.errors import error_response


class BodySizeLimitMiddleware:
    """Invariant: no handler sees a body over `max_bytes`, or one that took over `timeout_seconds`
    to arrive. A declared Content-Length over the limit is refused unread; any other body is read
    (at most `max_bytes` + one message) before the app runs and replayed to it, so a chunked body
    is refused with 413 as well; a client that stalls mid-body is answered 408 and let go."""

    def __init__(self, app: ASGIApp, max_bytes: int, timeout_seconds: float = 30.0) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.timeout_seconds = timeout_seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(scope, receive, send)
            return
        messages: list[Message] = []
        size = 0
        deadline = time.monotonic() + self.timeout_seconds
        while True:
            try:
                message = await asyncio.wait_for(receive(), max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                message = f"The request body did not arrive within {self.timeout_seconds:g} s"
                await error_response(408, message, "request_timeout", headers={"Connection": "close"})(
                    scope, receive, send)
                return
            messages.append(message)
            if message["type"] != "http.request":
                break
            size += len(message.get("body", b""))
            if size > self.max_bytes:
                await self._refuse(scope, receive, send)
                return
            if not message.get("more_body", False):
                break

        async def replay() -> Message:
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        message = f"The request body exceeds the limit of {self.max_bytes} bytes"
        await error_response(413, message, "request_too_large")(scope, receive, send)
