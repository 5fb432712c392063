"""Every error case, one test each, in OpenAI's error shape."""
from __future__ import annotations

import json
import threading

import httpx
import pytest

from engine.client import EngineClient
from tests.api.conftest import speech_body, start_server


@pytest.fixture(scope="module")
def busy_server(chorus_cache):
    """One stream at a time and one waiting: a third concurrent request overflows the queue
    (admission off: its own refusals are tests/api/live/test_overload.py's)."""
    with start_server(api_key=None, max_num_seqs=1, max_num_batched_tokens=64, max_waiting=1,
                      max_queue_delay=None) as live:
        yield live


def post(server, body=None, **kwargs) -> httpx.Response:
    return httpx.post(f"{server.url}/v1/audio/speech", json=body, timeout=60, **kwargs)


def assert_error(response: httpx.Response, status: int, param: str | None, code: str | None = None) -> dict:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["param"] == param
    assert error["message"]
    if code is not None:
        assert error["code"] == code
    return error


@pytest.mark.parametrize(
    "change, param",
    [
        ({"speed": 4.5}, "speed"),
        ({"speed": 0.2}, "speed"),
        ({"response_format": "ogg"}, "response_format"),
        ({"stream_format": "chunks"}, "stream_format"),
        ({"input": "x" * 4097}, "input"),
        ({"input": "   "}, "input"),
        ({"voice": 3}, "voice"),
        ({"sample_rate": 7999}, "sample_rate"),
        ({"temperature": 0.5}, "temperature"),
        # A number is a JSON number: strings and booleans are not coerced.
        ({"speed": "1.5"}, "speed"),
        ({"speed": True}, "speed"),
        ({"sample_rate": "24000"}, "sample_rate"),
        ({"sample_rate": 24000.5}, "sample_rate"),
        ({"seed": "7"}, "seed"),
    ],
)
def test_invalid_parameter_is_400_naming_it(busy_server, change, param):
    assert_error(post(busy_server, speech_body(**change)), 400, param, "invalid_value")


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_speed_is_named_as_such(busy_server, literal):
    # Python's JSON reader (and so the server's) takes these literals; the error says what is wrong.
    raw = json.dumps(speech_body(speed=1.0)).replace('"speed": 1.0', f'"speed": {literal}')
    response = httpx.post(f"{busy_server.url}/v1/audio/speech", content=raw,
                          headers={"Content-Type": "application/json"}, timeout=60)
    error = assert_error(response, 400, "speed", "invalid_value")
    assert "finite" in error["message"]


def test_missing_required_parameter_is_400_naming_it(busy_server):
    body = speech_body()
    del body["input"]
    assert_error(post(busy_server, body), 400, "input")


@pytest.mark.parametrize("fmt, rate", [("mp3", 10000), ("mulaw", 24000), ("alaw", 22050)])
def test_rate_a_codec_cannot_carry_is_400(busy_server, fmt, rate):
    assert_error(post(busy_server, speech_body(response_format=fmt, sample_rate=rate)), 400, "sample_rate")


def test_body_that_is_not_json_is_400(busy_server):
    response = httpx.post(f"{busy_server.url}/v1/audio/speech", content=b"{not json", headers={"content-type": "application/json"})
    assert_error(response, 400, None, "invalid_json")


def test_unknown_model_is_404(busy_server):
    assert_error(post(busy_server, speech_body(model="tts-2")), 404, "model", "model_not_found")


@pytest.mark.parametrize("voice", ["nobody", {"id": "nobody"}])
def test_unknown_voice_is_404(busy_server, voice):
    assert_error(post(busy_server, speech_body(voice=voice)), 404, "voice", "voice_not_found")


def test_unknown_route_is_404_in_openai_shape(busy_server):
    assert_error(httpx.get(f"{busy_server.url}/v1/nothing"), 404, None, "not_found")


def test_declared_body_over_the_limit_is_413(busy_server):
    body = speech_body(input="x" * 4000, instructions="y" * 4000)
    padded = (str(body).replace("'", '"')[:-1] + ', "pad": "' + "z" * 70_000 + '"}').encode()
    response = httpx.post(f"{busy_server.url}/v1/audio/speech", content=padded, headers={"content-type": "application/json"})
    assert_error(response, 413, None, "request_too_large")


def test_chunked_body_over_the_limit_is_413(busy_server):
    def chunks():
        yield b'{"model": "tts-1", "input": "'
        for _ in range(20):
            yield b"x" * 4096
        yield b'"}'

    response = httpx.post(f"{busy_server.url}/v1/audio/speech", content=chunks(), headers={"content-type": "application/json"})
    assert_error(response, 413, None, "request_too_large")


def test_full_queue_is_429_with_retry_after(busy_server):
    statuses: list[httpx.Response] = []
    lock = threading.Lock()

    def hold_stream():
        body = speech_body(input="A longer sentence that keeps the only slot busy for a while.")
        with httpx.stream("POST", f"{busy_server.url}/v1/audio/speech", json=body, timeout=120) as response:
            response.read()
            with lock:
                statuses.append(response)

    threads = [threading.Thread(target=hold_stream) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    refused = [r for r in statuses if r.status_code == 429]
    assert refused, [r.status_code for r in statuses]
    assert int(refused[0].headers["Retry-After"]) >= 1
    assert_error(refused[0], 429, None, "queue_full")
    assert any(r.status_code == 200 for r in statuses)


def test_not_ready_is_503(busy_server, monkeypatch):
    monkeypatch.setattr(EngineClient, "is_ready", property(lambda self: False))
    assert_error(post(busy_server, speech_body()), 503, None, "engine_not_ready")
    assert httpx.get(f"{busy_server.url}/ready").status_code == 503
    assert httpx.get(f"{busy_server.url}/health").status_code == 200


def test_missing_api_key_is_401_and_health_stays_open(server):
    assert_error(post(server, speech_body()), 401, None, "invalid_api_key")
    assert_error(httpx.get(f"{server.url}/v1/models"), 401, None, "invalid_api_key")
    assert_error(post(server, speech_body(), headers={"Authorization": "Bearer wrong"}), 401, None, "invalid_api_key")
    assert_error(post(server, speech_body(), headers={"Authorization": "Basic test-key"}), 401, None, "invalid_api_key")
    assert httpx.get(f"{server.url}/health").status_code == 200
    assert httpx.get(f"{server.url}/ready").status_code == 200


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER", "Token", "token"])
def test_the_auth_scheme_is_case_insensitive(server, scheme):
    # HTTP makes the scheme name case-insensitive (RFC 9110); the key itself is compared exactly.
    response = httpx.get(f"{server.url}/v1/models", headers={"Authorization": f"{scheme} test-key"})
    assert response.status_code == 200
    assert httpx.get(f"{server.url}/v1/models", headers={"Authorization": f"{scheme} TEST-KEY"}).status_code == 401


def test_docs_pages_that_load_a_cdn_are_off_and_the_openapi_description_stays(server):
    assert httpx.get(f"{server.url}/docs").status_code == 404
    assert httpx.get(f"{server.url}/redoc").status_code == 404
    assert httpx.get(f"{server.url}/openapi.json").json()["info"]["title"] == "Chorus"
