"""A new speech in a flood is refused before its body is read, in its route's error shape."""
from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

from api.http.flood_door import FloodDoorMiddleware
from api.speech.early_refusal import FLOOD_REFUSALS, EarlyRefusal
from capacity.room import Room
from engine.outputs import EngineStats

ROUTES = {("POST", "/v1/audio/speech"), ("POST", "/v1/speak")}


class Counted:
    def __init__(self) -> None:
        self.outcomes: list[str] = []

    def count_request(self, outcome: str) -> None:
        self.outcomes.append(outcome)


def call(gate: EarlyRefusal, method: str, path: str) -> tuple[list[dict], bool, int]:
    """(what was sent, whether the app behind ran, how many body messages were read)."""
    reached, reads, sent = [], [0], []

    async def inner(scope, receive, send):
        reached.append(True)

    async def receive():
        reads[0] += 1
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message):
        sent.append(message)

    state = SimpleNamespace(early_refusal=gate, settings=SimpleNamespace(retry_after_seconds=1), metrics=Counted(),
                            engine=SimpleNamespace(is_ready=True, stats=EngineStats(num_running=8, room=Room(3, 3))))
    scope = {"type": "http", "method": method, "path": path, "app": SimpleNamespace(state=state), "headers": []}
    asyncio.run(FloodDoorMiddleware(inner, ROUTES)(scope, receive, send))
    return sent, bool(reached), reads[0]


def flooded_gate() -> EarlyRefusal:
    gate = EarlyRefusal(admission_on=True)
    gate.active = 1  # a speech of its own in flight
    full = EngineStats(num_running=8, room=Room(0, 0))
    for _ in range(FLOOD_REFUSALS):
        try:
            gate.check(full)
        except Exception:  # noqa: BLE001 - each is a refusal, as a burst's are
            pass
    return gate


def test_in_a_flood_a_speech_is_refused_unread_in_its_routes_shape():
    sent, reached, reads = call(flooded_gate(), "POST", "/v1/audio/speech")
    assert not reached and reads == 0 and sent[0]["status"] == 429
    headers = dict(sent[0]["headers"])
    assert headers[b"retry-after"] == b"1"
    assert json.loads(sent[1]["body"])["error"]["code"] == "overloaded"
    sent, reached, _ = call(flooded_gate(), "POST", "/v1/speak")
    assert not reached and sent[0]["status"] == 429 and "err_code" in json.loads(sent[1]["body"])


def test_outside_a_flood_or_off_its_routes_the_request_goes_on():
    assert call(EarlyRefusal(admission_on=True), "POST", "/v1/audio/speech")[1]
    assert call(flooded_gate(), "GET", "/health")[1]
    assert call(flooded_gate(), "POST", "/v1/audio/voices")[1]
