"""Refuses request bodies above a size limit with 413, bodies that arrive too slowly with 408,
and JSON bodies that are not JSON within a nesting depth with 400, before any handler parses
them; each in its route's error shape (api/http/error_shape.py). A JSON body's parse is handed to
the route (api/http/parsed_body.py), so it is parsed once, and off the event loop when large."""
from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping

from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.http.error_shape import refusal
from api.http.json_limits import InvalidJson, loads_bounded
from api.http.parsed_body import INLINE_JSON_BYTES, PARSED_JSON


def _media_type(scope: Scope) -> bytes | None:
    """The body's declared media type, lower case without parameters; None when undeclared."""
    declared = dict(scope["headers"]).get(b"content-type")
    return None if declared is None else declared.split(b";", 1)[0].strip().lower()


def _says_json(scope: Scope) -> bool:
    """Whether a request's body is JSON as FastAPI reads it: declared so (application/json, or a
    +json type), or of no declared type at all."""
    media_type = _media_type(scope)
    return media_type is None or media_type == b"application/json" or media_type.endswith(b"+json")


async def _parse_json(scope: Scope, messages: list[Message]) -> str | None:
    """Parses a complete, non-empty JSON body into the scope for the route (PARSED_JSON); returns
    why it is not JSON within MAX_JSON_DEPTH, or None when it is, or is not JSON's to judge."""
    if messages[-1]["type"] != "http.request" or not _says_json(scope):
        return None  # the client left mid-body, or the route reads some other type
    body = b"".join(message.get("body", b"") for message in messages)
    if not body:
        return None
    try:
        if len(body) <= INLINE_JSON_BYTES:
            scope[PARSED_JSON] = loads_bounded(body)
        else:
            scope[PARSED_JSON] = await asyncio.to_thread(loads_bounded, body)
    except InvalidJson as exc:
        return str(exc)
    return None


class BodySizeLimitMiddleware:
    """Invariant: no handler sees a body over `max_bytes` (or, for a multipart/form-data body,
    its route's own limit in `upload_limits`), or one that took over `timeout_seconds` to
    arrive, or a JSON body that is not UTF-8 JSON nesting at most MAX_JSON_DEPTH levels
    (api/http/json_limits.py: Python's parser meets a deep one with RecursionError, a 500). A
    declared Content-Length over the limit is refused unread; any other body is read (at most
    the limit + one message) before the app runs and replayed to it, so a chunked body is
    refused with 413 as well; a client that stalls mid-body is answered 408 and let go."""

    def __init__(self, app: ASGIApp, max_bytes: int, timeout_seconds: float = 30.0,
                 upload_limits: Mapping[tuple[str, str], int] | None = None) -> None:
        """`upload_limits`: (method, path) → the limit of a multipart/form-data body there, for
        the routes that take uploads; any other body on those routes has `max_bytes`, so that
        an upload's larger limit never lets a large JSON body through to a parser."""
        self.app = app
        self.max_bytes = max_bytes
        self.timeout_seconds = timeout_seconds
        self.upload_limits = dict(upload_limits or {})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        messages = await self._read_body(scope, receive)
        if isinstance(messages, Response):
            await messages(scope, receive, send)
            return
        if (fault := await _parse_json(scope, messages)) is not None:
            message = f"The request body is not valid JSON: {fault}"
            await refusal(scope["path"], 400, message, "invalid_json", "INVALID_JSON")(scope, receive, send)
            return

        async def replay() -> Message:
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)

    async def _read_body(self, scope: Scope, receive: Receive) -> list[Message] | Response:
        """The body's messages up to its last (or a disconnect), or the refusal of the body."""
        path = scope["path"]
        limit = self.max_bytes
        if _media_type(scope) == b"multipart/form-data":
            limit = self.upload_limits.get((scope["method"], path), limit)
        too_large = f"The request body exceeds the limit of {limit} bytes"
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            return refusal(path, 413, too_large, "request_too_large", "REQUEST_TOO_LARGE")
        messages: list[Message] = []
        size = 0
        deadline = time.monotonic() + self.timeout_seconds
        while True:
            try:
                message = await asyncio.wait_for(receive(), max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                slow = f"The request body did not arrive within {self.timeout_seconds:g} s"
                return refusal(path, 408, slow, "request_timeout", "REQUEST_TIMEOUT", headers={"Connection": "close"})
            messages.append(message)
            if message["type"] != "http.request":
                return messages
            size += len(message.get("body", b""))
            if size > limit:
                return refusal(path, 413, too_large, "request_too_large", "REQUEST_TOO_LARGE")
            if not message.get("more_body", False):
                return messages
