"""Optional API key: `Authorization: Bearer KEY`, as OpenAI clients send it."""
from __future__ import annotations

import hmac

from starlette.types import ASGIApp, Receive, Scope, Send

from api.errors import error_response

# Only these need a key; health checks, the web page and the API description stay open.
PROTECTED_PREFIXES = ("/v1/", "/metrics")


class BearerKeyMiddleware:
    """Refuses a protected request (401, OpenAI error shape) unless it carries the key.
    Invariant: with no key configured it never refuses anything."""

    def __init__(self, app: ASGIApp, api_key: str | None) -> None:
        self.app = app
        self._expected = f"Bearer {api_key}".encode() if api_key else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._expected is None or scope["type"] != "http" or not scope["path"].startswith(PROTECTED_PREFIXES):
            await self.app(scope, receive, send)
            return
        presented = dict(scope["headers"]).get(b"authorization", b"")
        if hmac.compare_digest(presented, self._expected):
            await self.app(scope, receive, send)
            return
        message = "Missing API key: send 'Authorization: Bearer <key>'" if not presented else "Incorrect API key provided"
        await error_response(401, message, "invalid_api_key", headers={"WWW-Authenticate": "Bearer"})(
            scope, receive, send
        )
