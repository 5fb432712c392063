"""`normalize` on every route: a model that reads raw text (Qwen3-TTS here) gets its text through
the English normalizer when a request asks, or by the server's default; joe always normalizes in
its own front end; another language than English is refused by name."""
from __future__ import annotations

import json

import pytest
from starlette.testclient import TestClient, WebSocketDenialResponse

from api.app import create_app
from api.config.settings import ApiSettings
from tests.api.conftest import prepared_texts, speech_body
from tests.engine.conftest import engine_config

TWO_FRAMES = dict(min_audio_seconds=0.1, audio_seconds_per_char=0.01)
TEXT = "It costs $3.50 today."
SAID = "It costs three dollars and fifty cents today."


def serve(**settings) -> TestClient:
    config = engine_config("tiny-random-qwen3", num_blocks=128)
    config.num_threads = 1
    # No prompt cache: the tests watch what the front end is handed, and a text said again
    # would be served from the cache without reaching it.
    settings = dict(TWO_FRAMES, prompt_cache_mb=0) | settings
    return TestClient(create_app(config, ApiSettings(**settings)), raise_server_exceptions=False)


@pytest.fixture(scope="module")
def client(chorus_cache):
    with serve() as client:
        yield client


def test_the_openai_route_normalizes_when_asked(client):
    texts = prepared_texts(client.app)
    assert client.post("/v1/audio/speech", json=speech_body(input=TEXT, voice="ryan")).status_code == 200
    assert client.post("/v1/audio/speech", json=speech_body(input=TEXT, voice="ryan", normalize=True)).status_code == 200
    assert texts == [TEXT, SAID]


def test_deepgram_routes_take_it_as_a_query_parameter(client):
    texts = prepared_texts(client.app)
    spoken = client.post("/v1/speak?model=ryan&encoding=linear16&container=none&normalize=true", json={"text": TEXT})
    assert spoken.status_code == 200 and texts == [SAID]
    bad = client.post("/v1/speak?model=ryan&normalize=yes", json={"text": TEXT})
    assert bad.status_code == 400 and "normalize must be true or false" in bad.json()["err_msg"]
    # Sentence by sentence (live text reads the first words alone: test_live_text_socket.py).
    with client.websocket_connect("/v1/speak?model=ryan&encoding=linear16&normalize=true&live_text=false") as socket:
        assert json.loads(socket.receive_text())["type"] == "Metadata"
        socket.send_text(json.dumps({"type": "Speak", "text": TEXT}))
        socket.send_text(json.dumps({"type": "Flush"}))
        assert len(socket.receive_bytes()) > 0
    assert texts[-1] == SAID


def test_another_language_is_refused_naming_normalize(client):
    refused = client.post("/v1/audio/speech", json=speech_body(input=TEXT, voice="ryan", language="chinese",
                                                              normalize=True))
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "normalize"
    with pytest.raises(WebSocketDenialResponse):
        with client.websocket_connect("/v1/speak?model=ryan&language=chinese&normalize=true"):
            pass


def test_the_servers_default_applies_to_english_and_auto_only(chorus_cache):
    with serve(normalize_text=True) as client:
        texts = prepared_texts(client.app)
        for extra in ({}, {"language": "english"}, {"language": "chinese"}, {"normalize": False}):
            assert client.post("/v1/audio/speech", json=speech_body(input=TEXT, voice="ryan", **extra)).status_code == 200
        assert texts == [SAID, SAID, TEXT, TEXT]
