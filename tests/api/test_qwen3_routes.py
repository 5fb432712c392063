"""Every route serving a Qwen3-TTS checkpoint (the tiny random one: noise at 8 kHz, 640 samples a
12.5 Hz frame), in process: the app and its in-process engine under Starlette's TestClient, no
server. Outputs are capped at two frames (the checkpoint's least) to keep each speech short."""
from __future__ import annotations

import io
import json
import wave

import pytest
from starlette.testclient import TestClient, WebSocketDenialResponse

from api.app import create_app
from api.config.settings import ApiSettings
from tests.api.conftest import speech_body
from tests.api.qwen3_checkpoints import qwen3_checkpoint
from tests.engine.conftest import engine_config

RATE, SAMPLES_PER_FRAME = 8000, 640
# (0.1 s + 0.01 s a character) at 12.5 frames a second: two frames for a short input.
TWO_FRAMES = dict(min_audio_seconds=0.1, audio_seconds_per_char=0.01)


def serve(model: str) -> TestClient:
    config = engine_config(model, num_blocks=128)
    config.num_threads = 1
    return TestClient(create_app(config, ApiSettings(**TWO_FRAMES)), raise_server_exceptions=False)


@pytest.fixture(scope="module")
def client(chorus_cache):
    with serve(str(qwen3_checkpoint(chorus_cache))) as client:
        yield client


def speak(client: TestClient, **overrides):
    return client.post("/v1/audio/speech", json=speech_body(input="Hi.", **overrides))


def wav_rate(data: bytes) -> int:
    with wave.open(io.BytesIO(data)) as wav:
        return wav.getframerate()


def assert_openai_error(response, param: str, code: str) -> None:
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert (error["param"], error["code"], error["type"]) == (param, code, "invalid_request_error")


def test_the_voices_listing_says_speakers_languages_and_instructions(client):
    entry = client.get("/v1/audio/voices").json()["data"][0]
    assert entry["voices"] == ["vivian", "ryan", "uncle_fu", "eric", "dylan"]
    assert entry["languages"][0] == "auto" and "chinese" in entry["languages"]
    assert entry["instructions"] is True and entry["timestamps"] == []
    assert entry["aliases"]["ash"] == "ryan"


def test_a_speaker_speaks_with_instructions_at_the_models_rate(client):
    response = speak(client, voice="ryan", response_format="wav", sample_rate=RATE, language="English",
                     instructions="Speak slowly, warmly.")
    assert response.status_code == 200, response.text
    # NOTE: a streamed WAV's header says "until the end": the bytes after it are the samples.
    assert wav_rate(response.content) == RATE and (len(response.content) - 44) // 2 == 2 * SAMPLES_PER_FRAME


def test_an_alias_speaks_over_sse(client):
    response = speak(client, voice="alloy", stream_format="sse")
    assert response.status_code == 200, response.text
    events = [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]
    assert events[0]["type"] == "speech.audio.delta" and events[-1]["type"] == "speech.audio.done"


def test_refusals_name_their_parameter_before_any_audio(client):
    assert_openai_error(speak(client, voice="ryan", language="klingon"), "language", "unsupported_value")
    assert_openai_error(speak(client, stream_format="sse", timestamps="word"), "timestamps", "unsupported_value")
    assert speak(client, voice="nobody").json()["error"]["param"] == "voice"


def test_deepgram_speaks_a_speaker_and_refuses_an_unknown_language(client):
    query = "encoding=linear16&container=none&sample_rate=8000"
    response = client.post(f"/v1/speak?model=uncle_fu&{query}&language=chinese", json={"text": "Hi."})
    assert response.status_code == 200, response.text
    assert response.headers["dg-model-name"] == "uncle_fu" and len(response.content) == 2 * 2 * SAMPLES_PER_FRAME
    refused = client.post(f"/v1/speak?model=aura-2-thalia-en&{query}&language=klingon", json={"text": "Hi."})
    assert refused.status_code == 400 and refused.json()["err_code"] == "INVALID_QUERY_PARAMETER"
    assert "language" in refused.json()["err_msg"]
    with pytest.raises(WebSocketDenialResponse) as denied:
        with client.websocket_connect("/v1/speak?model=vivian&language=klingon"):
            pass
    assert denied.value.status_code == 400 and denied.value.json()["err_code"] == "INVALID_QUERY_PARAMETER"


def socket_turn(client: TestClient, query: str) -> list:
    """One turn ("Hi.", then Flush) over the speak socket: every frame after the Metadata up to the
    Flushed (binary audio as its length in bytes, messages parsed)."""
    frames = []
    with client.websocket_connect(f"/v1/speak?{query}") as socket:
        assert socket.receive_json()["type"] == "Metadata"
        socket.send_json({"type": "Speak", "text": "Hi."})
        socket.send_json({"type": "Flush"})
        while not frames or frames[-1] != {"type": "Flushed", "sequence_id": 0}:
            message = socket.receive()
            frames.append(len(message["bytes"]) if message.get("bytes") is not None else json.loads(message["text"]))
    return frames


def test_the_speak_socket_speaks_a_speaker(client):
    frames = socket_turn(client, "model=Eric&encoding=linear16&sample_rate=8000&language=chinese")
    assert sum(frame for frame in frames if isinstance(frame, int)) == 2 * 2 * SAMPLES_PER_FRAME


def test_voice_design_needs_instructions(chorus_cache):
    with serve(str(qwen3_checkpoint(chorus_cache, "voice_design"))) as design:
        assert design.get("/v1/audio/voices").json()["data"][0]["voices"] == ["designed"]
        assert_openai_error(speak(design), "instructions", "invalid_value")
        spoken = speak(design, voice="designed", instructions="A calm, low voice.", response_format="pcm",
                       sample_rate=RATE)
        assert spoken.status_code == 200 and len(spoken.content) == 2 * 2 * SAMPLES_PER_FRAME
        # The socket has no body to refuse: the turn is answered with an Error naming the parameter.
        error, flushed = socket_turn(design, "model=aura-2-thalia-en")
        assert error["type"] == "Error" and error["variant"] == "INVALID_QUERY_PARAMETER"
        assert "instructions" in error["description"] and flushed["type"] == "Flushed"
