"""Refusing a new speech during a flood before its body is read.

While the early refusal holds a flood off (api/speech/early_refusal.py), every new speech is
refused whatever it asks for, so its refusal needs nothing of its body: answered here, after the
key check and before the body is read, parsed and validated, it costs the event loop far less,
and the rest of the burst is read sooner. Answered in its route's error shape (OpenAI's or
Deepgram's), counted as the route counts a refusal.
"""
from __future__ import annotations

from collections.abc import Collection

from starlette.types import ASGIApp, Receive, Scope, Send

from api.http.error_shape import speech_refusal
from api.speech.errors import outcome_of, speech_error
from engine.errors import RequestRejected


class FloodDoorMiddleware:
    """Invariant: a request to one of `routes` (method, path) is answered here only with a 429
    the early refusal raised in a flood (`EarlyRefusal.check_flood`), before any of its body is
    read; every other request goes on untouched."""

    def __init__(self, app: ASGIApp, routes: Collection[tuple[str, str]]) -> None:
        self.app = app
        self.routes = frozenset(routes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and (scope["method"], scope["path"]) in self.routes:
            state = scope["app"].state
            gate, engine = getattr(state, "early_refusal", None), getattr(state, "engine", None)
            if gate is not None and engine is not None and engine.is_ready:
                try:
                    gate.check_flood(engine.stats)
                except RequestRejected as exc:
                    error = speech_error(exc, state.settings.retry_after_seconds)
                    state.metrics.count_request(outcome_of(error.status))
                    await speech_refusal(scope["path"], error)(scope, receive, send)
                    return
        await self.app(scope, receive, send)
