"""Optional API key: `Authorization: Bearer KEY` as OpenAI clients send it, or `Token KEY` as
Deepgram's do (on its WebSocket also the `token` subprotocol; api/deepgram/socket.py)."""
from __future__ import annotations

import hmac

from starlette.types import ASGIApp, Receive, Scope, Send

from api.deepgram.errors import DeepgramError
from api.http.error_shape import speaks_deepgram
from api.openai.errors import error_response

# Only these need a key; health checks, the web page and the API description stay open.
PROTECTED_PREFIXES = ("/v1/", "/metrics")
# ...and these two read-only lists too: Open WebUI fetches them without sending its key (a
# refusal makes it fall back to OpenAI's six voice names), and they only name voices and models.
OPEN_PATHS = ("/v1/audio/voices", "/v1/audio/models")
AUTH_SCHEMES = ("bearer", "token")


def key_matches(authorization: str | None, api_key: str) -> bool:
    """Whether an Authorization header value carries `api_key` under either scheme (whose name
    HTTP makes case-insensitive: `bearer KEY` is `Bearer KEY`; the key itself is not)."""
    scheme, _, presented = (authorization or "").strip().partition(" ")
    # NOTE: compared in constant time whatever the scheme, so a wrong scheme takes as long.
    matches = hmac.compare_digest(presented.strip().encode(), api_key.encode())
    return matches and scheme.lower() in AUTH_SCHEMES


class BearerKeyMiddleware:
    """Refuses a protected HTTP request (401, in OpenAI's error shape; on Deepgram's routes in
    Deepgram's) unless it carries the key. Invariant: with no key configured it never refuses
    anything; WebSocket routes check the key themselves (a refusal there is a closed handshake)."""

    def __init__(self, app: ASGIApp, api_key: str | None) -> None:
        self.app = app
        self.api_key = api_key

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (self.api_key is None or scope["type"] != "http" or not scope["path"].startswith(PROTECTED_PREFIXES)
                or scope["path"] in OPEN_PATHS):
            await self.app(scope, receive, send)
            return
        presented = dict(scope["headers"]).get(b"authorization", b"").decode("latin-1")
        if key_matches(presented, self.api_key):
            await self.app(scope, receive, send)
            return
        if speaks_deepgram(scope["path"]):
            response = DeepgramError(401, "INVALID_AUTH", "Invalid credentials.").response("unauthenticated")
        else:
            message = "Missing API key: send 'Authorization: Bearer <key>'" if not presented else "Incorrect API key provided"
            response = error_response(401, message, "invalid_api_key", headers={"WWW-Authenticate": "Bearer"})
        await response(scope, receive, send)
