"""Each HTTP response behind Serve's proxy names the replica that served it."""
from __future__ import annotations

from ray import serve
from starlette.types import ASGIApp, Message, Receive, Scope, Send

REPLICA_HEADER = "x-chorus-replica"


class ReplicaHeader:
    """ASGI middleware. Invariant: every HTTP response it passes carries REPLICA_HEADER with this
    replica's id (Serve's `replica_id.unique_id`, the suffix of the replica actor's name);
    WebSocket handshakes pass untouched."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        replica = serve.get_replica_context().replica_id.unique_id.encode()

        async def send_with_header(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), (REPLICA_HEADER.encode(), replica)]}
            await send(message)

        await self.app(scope, receive, send_with_header)
