"""The voice library over HTTP (Starlette's TestClient, the app in this process; each upload is
decoded in a decoder process, hence the live tier): upload a clip, list, speak in it on every
route, delete, keys owning their voices, limits, restart, a corrupt folder."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from starlette.testclient import TestClient, WebSocketDenialResponse

from api.app import create_app
from api.config.settings import ApiSettings
from tests.api.conftest import speech_body
from tests.api.voice_clips import BASE, GOLDEN, TWO_FRAMES, wav_bytes
from tests.engine.conftest import engine_config

KEYS = ("key-alpha", "key-beta")


@pytest.fixture(scope="module")
def clip() -> bytes:
    with np.load(GOLDEN) as golden:
        return wav_bytes(np.tile(golden["base_clip"], 2))  # 3 s of the synthetic voice


def serve(voices_dir: Path, model: str = BASE, **settings) -> TestClient:
    config = engine_config(model, num_blocks=128)
    config.num_threads = 1
    app = create_app(config, ApiSettings(voices_dir=str(voices_dir), **{**TWO_FRAMES, **settings}))
    return TestClient(app, raise_server_exceptions=False)


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def upload(client: TestClient, data: bytes, name: str = "Ann", headers: dict | None = None, **fields):
    return client.post("/v1/audio/voices", data={"name": name, **fields}, files={"audio": ("clip.wav", data, "audio/wav")},
                       headers=headers or {})


def speak(client: TestClient, voice, headers: dict | None = None, **overrides):
    return client.post("/v1/audio/speech", json=speech_body(input="Hi there.", voice=voice, **overrides),
                       headers=headers or {})


def assert_error(response, status: int, param: str | None, code: str | None = None) -> None:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["param"] == param, error
    if code is not None:
        assert error["code"] == code, error


@pytest.fixture(scope="module")
def library_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("voices")


@pytest.fixture(scope="module")
def client(library_dir, chorus_cache):
    with serve(library_dir) as client:
        yield client


def test_a_voice_is_made_listed_spoken_in_everywhere_and_deleted(client, clip):
    made = upload(client, clip, "Ann", transcript="The weather is nice today.", description="calm")
    assert made.status_code == 201, made.text
    voice = made.json()
    assert voice["id"].startswith("voice_") and voice["object"] == "audio.voice"
    assert (voice["name"], voice["mode"], voice["model"], voice["description"]) == ("Ann", "in_context", BASE, "calm")
    assert 2.5 <= voice["seconds"] <= 3.0
    listing = client.get("/v1/audio/voices").json()
    assert listing["data"][0]["clones"] is True
    assert [v["id"] for v in listing["data"][0]["stored"]] == [voice["id"]]
    assert {"id": voice["id"], "name": "Ann"} in listing["voices"]  # Open WebUI's flat list
    assert client.get(f"/v1/audio/voices/{voice['id']}").json() == voice
    for ref in (voice["id"], "ann", {"id": voice["id"]}):
        spoken = speak(client, ref)
        assert spoken.status_code == 200 and len(spoken.content) > 0, spoken.text
    sse = speak(client, "Ann", stream_format="sse")
    assert sse.status_code == 200 and "speech.audio.done" in sse.text
    deepgram = client.post("/v1/speak?model=Ann&encoding=linear16&container=none", json={"text": "Hi there."})
    assert deepgram.status_code == 200 and len(deepgram.content) > 0, deepgram.text
    with client.websocket_connect("/v1/speak?model=Ann&encoding=linear16") as socket:
        assert json.loads(socket.receive_text())["type"] == "Metadata"
        socket.send_text(json.dumps({"type": "Speak", "text": "Hi there."}))
        socket.send_text(json.dumps({"type": "Flush"}))
        assert len(socket.receive_bytes()) > 0
    deleted = client.delete(f"/v1/audio/voices/{voice['id']}")
    assert deleted.json() == {"id": voice["id"], "object": "audio.voice.deleted", "deleted": True}
    assert_error(speak(client, "Ann"), 404, "voice", "voice_not_found")
    assert_error(client.get(f"/v1/audio/voices/{voice['id']}"), 404, "voice_id")
    assert_error(client.delete(f"/v1/audio/voices/{voice['id']}"), 404, "voice_id")


def test_names_are_unique_in_any_case_and_bounded(client, clip):
    first = upload(client, clip, "Bo")
    assert first.status_code == 201 and first.json()["mode"] == "x_vector"
    assert_error(upload(client, clip, "bo"), 409, "name", "voice_exists")
    assert_error(upload(client, clip, "\uff22\uff4f"), 409, "name", "voice_exists")  # fullwidth Ｂｏ
    assert_error(upload(client, clip, "x" * 65), 400, "name")
    assert_error(upload(client, clip, "tab\there"), 400, "name")
    assert_error(upload(client, clip, "Cy", language="klingon"), 400, "language")
    client.delete(f"/v1/audio/voices/{first.json()['id']}")


def test_a_name_is_stored_as_given_and_found_by_its_compatibility_form(client, clip):
    """NFKC decides sameness; the display name stays as the uploader wrote it."""
    given = "\uff24e\u0301a"  # fullwidth D, e + combining acute, a
    voice = upload(client, clip, given).json()
    assert voice["name"] == given
    assert speak(client, "D\u00e9a").status_code == 200  # the same name, composed and halfwidth
    assert_error(upload(client, clip, "d\u00e9a"), 409, "name", "voice_exists")
    client.delete(f"/v1/audio/voices/{voice['id']}")


@pytest.mark.parametrize("data, fault", [(b"", "empty"), (b"\x89PNG\r\n\x1a\n" + bytes(64), "not audio"),
                                         ("silence", "silent"), ("short", "too short")])
def test_a_clip_that_cannot_be_a_voice_is_a_400_naming_audio(client, data, fault):
    rate = 24000
    if data == "silence":
        data = wav_bytes(np.zeros(3 * rate))
    elif data == "short":
        data = wav_bytes(0.3 * np.sin(np.arange(rate // 2) * 0.05))
    assert_error(upload(client, data, f"bad {fault}"), 400, "audio")
    assert client.get("/v1/audio/voices").json()["data"][0]["stored"] == []


def test_an_empty_transcript_is_refused_naming_it(client, clip):
    assert_error(upload(client, clip, "Dee", transcript="   "), 400, "transcript")


def test_a_missing_field_is_a_400(client, clip):
    missing_name = client.post("/v1/audio/voices", files={"audio": ("clip.wav", clip, "audio/wav")})
    assert_error(missing_name, 400, "name")


def test_keys_own_their_voices(tmp_path, clip, chorus_cache):
    alpha, beta = bearer(KEYS[0]), bearer(KEYS[1])
    with serve(tmp_path, api_keys=KEYS) as client:
        assert_error(upload(client, clip, "Ann"), 401, None, "invalid_api_key")
        voice = upload(client, clip, "Ann", headers=alpha).json()
        assert upload(client, clip, "Ann", headers=beta).status_code == 201  # another key's namespace
        assert [v["name"] for v in client.get("/v1/audio/voices", headers=beta).json()["data"][0]["stored"]] == ["Ann"]
        assert client.get("/v1/audio/voices").json()["data"][0]["stored"] == []  # no key: no key's voices
        assert_error(client.get(f"/v1/audio/voices/{voice['id']}", headers=beta), 404, "voice_id")
        assert_error(client.delete(f"/v1/audio/voices/{voice['id']}", headers=beta), 404, "voice_id")
        assert_error(speak(client, voice["id"], headers=beta), 404, "voice")
        assert speak(client, voice["id"], headers=alpha).status_code == 200
        with pytest.raises(WebSocketDenialResponse) as denied:  # the socket's handshake needs a key
            with client.websocket_connect("/v1/speak?model=Ann"):
                pass
        assert denied.value.status_code == 401
        with client.websocket_connect("/v1/speak?model=Ann&encoding=linear16", subprotocols=["token", KEYS[0]]) as ws:
            assert json.loads(ws.receive_text())["type"] == "Metadata"


def test_voices_survive_a_restart_and_a_corrupt_one_is_skipped(tmp_path, clip, chorus_cache):
    with serve(tmp_path) as client:
        kept = upload(client, clip, "Kept").json()
        broken = upload(client, clip, "Broken").json()
    (tmp_path / broken["id"] / "arrays.safetensors").write_bytes(b"not safetensors")
    (tmp_path / ".tmp-voice_000000000000000000000000").mkdir()  # an upload cut short
    with serve(tmp_path) as client:
        assert [v["id"] for v in client.get("/v1/audio/voices").json()["data"][0]["stored"]] == [kept["id"]]
        assert speak(client, "Kept").status_code == 200
        assert client.app.state.catalog.library.skipped[0].startswith(str(tmp_path / broken["id"]))
    assert not (tmp_path / ".tmp-voice_000000000000000000000000").exists()


def test_limits_on_count_and_upload_size(tmp_path, clip, chorus_cache):
    with serve(tmp_path, max_voices_per_owner=1, max_voice_upload_bytes=len(clip) + 1024) as client:
        assert upload(client, clip, "One").status_code == 201
        assert_error(upload(client, clip, "Two"), 429, "name", "too_many_voices")
        big = wav_bytes(np.zeros(2 * len(clip) // 2))
        too_large = upload(client, big, "Big")
        assert too_large.status_code == 413, too_large.text


def test_a_model_that_cannot_clone_refuses_uploads_and_other_models_voices(tmp_path, clip, chorus_cache):
    with serve(tmp_path) as client:
        made = upload(client, clip, "Ann").json()
    with serve(tmp_path, model="tiny-random-qwen3") as client:
        assert_error(upload(client, clip, "Eve"), 400, "audio", "unsupported_value")
        refused = speak(client, made["id"])
        assert_error(refused, 400, "voice")
        assert BASE in refused.json()["error"]["message"]


def test_deleting_a_voice_in_use_lets_its_speech_finish(client, clip):
    """A speech holds its voice's arrays: the deletion refuses new requests only. The input has
    several sentences, so segments after the deletion are still prepared in the voice."""
    voice = upload(client, clip, "Busy", transcript="The weather is nice today.").json()
    text = " ".join(f"Sentence number {i} is here." for i in range(6))
    with client.stream("POST", "/v1/audio/speech", json=speech_body(input=text, voice="Busy")) as response:
        assert response.status_code == 200
        chunks = response.iter_bytes()
        first = next(chunks)
        assert client.delete(f"/v1/audio/voices/{voice['id']}").status_code == 200
        assert_error(speak(client, "Busy"), 404, "voice")
        rest = b"".join(chunks)
    assert len(first) + len(rest) > 6 * 2 * 640 * 2  # pcm16: at least two 640-sample frames a sentence
