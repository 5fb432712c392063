"""Optional API keys: `Authorization: Bearer KEY` as OpenAI clients send it, or `Token KEY` as
Deepgram's do (on its WebSocket also the `token` subprotocol; api/deepgram/socket.py).

A server may hold several keys; each is an owner of the voice library (api/voices/), known on the
server only by a digest of its key (`owner_of`), which the middleware puts on the request's state
(`request.state.owner`; None without keys or without a valid key on an open route)."""
from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence

from starlette.types import ASGIApp, Receive, Scope, Send

from api.deepgram.errors import DeepgramError
from api.http.error_shape import speaks_deepgram
from api.openai.errors import error_response

# Only these need a key; health checks, the web page and the API description stay open.
PROTECTED_PREFIXES = ("/v1/", "/metrics")
# ...except reading these two lists: Open WebUI fetches them without sending its key (a refusal
# makes it fall back to OpenAI's six voice names). Without a key they list no key's voices.
OPEN_READS = ("/v1/audio/voices", "/v1/audio/models")
AUTH_SCHEMES = ("bearer", "token")


def owner_of(api_key: str) -> str:
    """The voice library's name for a key's owner: a digest, so no key is ever stored."""
    return hashlib.sha256(api_key.encode()).hexdigest()[:32]


class ApiKeys:
    """The server's keys. Invariant: empty means no auth; `owner` compares a presented key with
    every key in constant time, so the time taken says nothing of which (or whether one) matched."""

    def __init__(self, keys: Sequence[str]) -> None:
        self._keys = [(key.encode(), owner_of(key)) for key in keys]

    def __bool__(self) -> bool:
        return bool(self._keys)

    def owner(self, presented: str) -> str | None:
        """The owner of the key `presented` (the key itself, not a header); None if no key is it."""
        found = None
        for key, owner in self._keys:
            if hmac.compare_digest(presented.encode(), key):
                found = owner
        return found

    def owner_of_header(self, authorization: str | None) -> str | None:
        """The owner of the key an Authorization header carries under either scheme (whose name
        HTTP makes case-insensitive: `bearer KEY` is `Bearer KEY`; the key itself is not)."""
        scheme, _, presented = (authorization or "").strip().partition(" ")
        owner = self.owner(presented.strip())
        return owner if scheme.lower() in AUTH_SCHEMES else None


class BearerKeyMiddleware:
    """Refuses a protected HTTP request (401, in OpenAI's error shape; on Deepgram's routes in
    Deepgram's) unless it carries a key, and sets `state["owner"]` on every HTTP request.
    Invariant: with no keys it never refuses anything; WebSocket routes check the key themselves
    (a refusal there is a closed handshake)."""

    def __init__(self, app: ASGIApp, api_keys: ApiKeys) -> None:
        self.app = app
        self.keys = api_keys

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self.keys or scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        presented = dict(scope["headers"]).get(b"authorization", b"").decode("latin-1")
        owner = self.keys.owner_of_header(presented)
        scope.setdefault("state", {})["owner"] = owner
        path = scope["path"]
        open_read = scope["method"] in ("GET", "HEAD") and path in OPEN_READS
        if owner is not None or open_read or not path.startswith(PROTECTED_PREFIXES):
            await self.app(scope, receive, send)
            return
        if speaks_deepgram(path):
            response = DeepgramError(401, "INVALID_AUTH", "Invalid credentials.").response("unauthenticated")
        else:
            message = "Missing API key: send 'Authorization: Bearer <key>'" if not presented else "Incorrect API key provided"
            response = error_response(401, message, "invalid_api_key", headers={"WWW-Authenticate": "Bearer"})
        await response(scope, receive, send)


def request_owner(state: object) -> str | None:
    """The owner the middleware found for a request (its `request.state`); None without keys."""
    return getattr(state, "owner", None)
