"""Refuses a request whose query string holds a name or value that no route should see: one
that is not percent-encoded UTF-8, or that holds a control character or one outside Latin-1.
Such a value cannot go in a response header (Latin-1, no CR, LF or NUL), and none of the
routes' parameters needs one, so it is refused with 400 naming the parameter rather than let
through to a route that might quote it."""
from __future__ import annotations

import re
from urllib.parse import unquote_to_bytes

from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocket

from api.http.error_shape import refusal
from api.http.quoting import quoted

# C0 controls (TAB, CR, LF and NUL among them), DEL, C1 controls, and anything past Latin-1.
_REFUSED_CHAR = re.compile(r"[\x00-\x1f\x7f-\x9f\u0100-\U0010ffff]")


class QueryFault(ValueError):
    """A query name or value that is refused; `param` is the parameter's name where it has one."""

    def __init__(self, param: str | None, message: str) -> None:
        super().__init__(message)
        self.param = param


def _decoded(raw: bytes, what: str, param: str | None) -> str:
    """One name or value of a query string, percent-decoded ("+" is a space) as UTF-8."""
    try:
        text = unquote_to_bytes(raw.replace(b"+", b" ")).decode("utf-8")
    except UnicodeDecodeError:
        raise QueryFault(param, f"{what} is not percent-encoded UTF-8") from None
    if (bad := _REFUSED_CHAR.search(text)) is not None:
        raise QueryFault(param, f"{what} holds U+{ord(bad.group()):04X}, a control character or one outside "
                                "Latin-1, which no parameter takes")
    return text


def check_query(query_string: bytes) -> None:
    """Raises QueryFault for the first name or value of `query_string` that is refused."""
    for pair in query_string.split(b"&"):
        raw_name, _, raw_value = pair.partition(b"=")
        name = _decoded(raw_name, "A query parameter's name", None)
        _decoded(raw_value, f"The query parameter {quoted(name)}", name)


class QueryCheckMiddleware:
    """Invariant: no route, HTTP or WebSocket, runs for a request whose query string holds a name
    or value that is not percent-encoded UTF-8 of printable Latin-1 characters; such a request is
    answered 400 in its route's error shape (a WebSocket handshake is denied with that answer)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            if scope["type"] in ("http", "websocket"):
                check_query(scope.get("query_string", b""))
        except QueryFault as fault:
            response = refusal(scope["path"], 400, str(fault), "invalid_value", "INVALID_QUERY_PARAMETER", fault.param)
            if scope["type"] == "websocket":
                await WebSocket(scope, receive, send).send_denial_response(response)
            else:
                await response(scope, receive, send)
            return
        await self.app(scope, receive, send)
