"""Malformed HTTP input (query values no header can carry, JSON nested past any parser's depth,
bodies that stall) is a 4xx in the route's own error shape: never a 500, never a dropped
connection. The middlewares are driven in-process (no engine: they answer before any route
runs); what depends on uvicorn's header encoding, or on a route, runs against the live server
(tests/api/live/test_malformed_input.py)."""
from __future__ import annotations

import asyncio
import json

import pytest
from starlette.testclient import TestClient, WebSocketDenialResponse

from api.app import create_app
from api.http.body_limit import BodySizeLimitMiddleware
from api.deepgram.errors import DeepgramError
from api.http.quoting import quoted
from api.openai.errors import error_type
from api.http.query_check import QueryFault, check_query
from api.config.settings import ApiSettings
from tests.api.conftest import API_KEY, speech_body
from tests.engine.conftest import engine_config

DEEPGRAM_AUTH = {"Authorization": f"Token {API_KEY}"}
# Percent-encoded query values no route takes: past Latin-1, CR LF, NUL, TAB, and not UTF-8.
REFUSED_VALUES = ["%E2%9C%93", "%0D%0A", "%00", "%09", "%FF"]
QUERY_PARAMS = ["model", "encoding", "sample_rate"]
DEEP = 10_000


@pytest.fixture(scope="module")
def client():
    """The app without its lifespan: no engine, so only what a middleware answers is served."""
    app = create_app(engine_config("no-model-needed"), ApiSettings())
    return TestClient(app, raise_server_exceptions=False)


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def assert_deepgram_error(response, status: int, err_code: str) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"err_code", "err_msg", "request_id"} and body["err_code"] == err_code
    assert response.headers["dg-error"] == DeepgramError(status, err_code, "").summary
    return body["err_msg"]


def assert_openai_error(response, status: int, code: str, param: str | None = None) -> dict:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert (error["code"], error["param"], error["type"]) == (code, param, "invalid_request_error")
    return error


# --- the query string -------------------------------------------------------------------------

@pytest.mark.parametrize("query", ["", "model=aura-2-thalia-en&speed=1.5", "model=caf%C3%A9", "a+b=c+d&&flag",
                                   "sample_rate=16000&encoding=linear16"])
def test_printable_latin1_queries_pass(query):
    check_query(query.encode())


@pytest.mark.parametrize("query, param", [("model=%E2%9C%93", "model"), ("a=1&sample_rate=%0D%0A", "sample_rate"),
                                          ("encoding=%00", "encoding"), ("model=%FF", "model"),
                                          ("model=\xe9", "model"), ("%FF=1", None), ("x%0A=1", None)])
def test_controls_non_latin1_and_non_utf8_are_refused_naming_the_parameter(query, param):
    with pytest.raises(QueryFault) as info:
        check_query(query.encode("latin-1"))
    assert info.value.param == param
    if param is not None:
        assert repr(param) in str(info.value)


@pytest.mark.parametrize("value", REFUSED_VALUES)
def test_elsewhere_a_refused_query_value_is_400_in_openai_shape(client, value):
    response = client.post(f"/v1/audio/speech?voice={value}", json=speech_body())
    assert_openai_error(response, 400, "invalid_value", "voice")


@pytest.mark.parametrize("value", REFUSED_VALUES)
def test_the_socket_handshake_is_denied_in_process_too(client, value):
    with pytest.raises(WebSocketDenialResponse) as info:
        with client.websocket_connect(f"/v1/speak?model={value}"):
            pass
    assert "'model'" in assert_deepgram_error(info.value, 400, "INVALID_QUERY_PARAMETER")


# --- headers and messages hold nothing of the request's raw -----------------------------------

def test_dg_error_is_a_fixed_phrase_and_the_body_keeps_the_message():
    message = "No such model: 'x\r\nSet-Cookie: a=b ✓'"
    response = DeepgramError(400, "UNKNOWN_MODEL", message).response("id-1")
    assert response.headers["dg-error"] == "Unknown model"
    assert json.loads(response.body) == {"err_code": "UNKNOWN_MODEL", "err_msg": message, "request_id": "id-1"}


def test_an_err_code_that_is_not_a_constant_is_a_bug():
    with pytest.raises(ValueError):
        DeepgramError(400, "bad\r\ncode", "message")


def test_a_quoted_value_is_escaped_and_cut():
    assert quoted("a\r\nb") == r"'a\r\nb'"
    assert quoted("x" * 100) == repr("x" * 64) + "…"
    # A socket message's `type` is whatever JSON the client sent.
    assert (quoted(None), quoted(5), quoted([1] * 40)) == ("None", "5", repr([1] * 40)[:64] + "…")


# --- JSON bodies --------------------------------------------------------------------------------

@pytest.mark.parametrize("raw", [
    json.dumps(speech_body())[:-1] + ', "x": ' + nested(DEEP) + "}",
    "[" * 60_000,
    '{"model": "tts-1", "input": "\xff"}'.encode("latin-1"),
])
def test_json_a_parser_cannot_take_is_400_in_openai_shape(client, raw):
    response = client.post("/v1/audio/speech", content=raw, headers={"content-type": "application/json"})
    assert_openai_error(response, 400, "invalid_json")


@pytest.mark.parametrize("headers", [{"content-type": "application/json"}, {}])
def test_json_a_parser_cannot_take_is_400_in_deepgrams_shape(client, headers):
    raw = '{"text": "Hi.", "x": ' + nested(DEEP) + "}"
    message = assert_deepgram_error(client.post("/v1/speak", content=raw, headers=headers), 400, "INVALID_JSON")
    assert "nests more than" in message


def test_a_body_over_the_limit_is_413_in_deepgrams_shape(client):
    response = client.post("/v1/speak", content=b'{"text": "' + b"x" * 70_000 + b'"}',
                           headers={"content-type": "application/json"})
    assert_deepgram_error(response, 413, "REQUEST_TOO_LARGE")


# --- a body that stalls -------------------------------------------------------------------------

async def stalled_answer(path: str) -> tuple[int, dict, bytes]:
    """The status, headers and body the body middleware answers a body that stops after 4 bytes."""
    first = [{"type": "http.request", "body": b'{"te', "more_body": True}]
    sent: list[dict] = []

    async def app(scope, receive, send):
        raise AssertionError("the app must not run")

    async def receive():
        if first:
            return first.pop()
        await asyncio.Event().wait()  # the rest never comes

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": path, "headers": [(b"content-type", b"application/json")]}
    await BodySizeLimitMiddleware(app, max_bytes=1024, timeout_seconds=0.05)(scope, receive, send)
    headers = {k.decode(): v.decode() for k, v in sent[0]["headers"]}
    return sent[0]["status"], headers, b"".join(m.get("body", b"") for m in sent[1:])


def test_a_stalled_body_is_the_clients_fault_in_openai_shape():
    status, headers, body = asyncio.run(stalled_answer("/v1/audio/speech"))
    error = json.loads(body)["error"]
    assert (status, error["code"], error["type"]) == (408, "request_timeout", "invalid_request_error")
    assert headers["connection"] == "close"


def test_a_stalled_body_is_408_in_deepgrams_shape():
    status, headers, body = asyncio.run(stalled_answer("/v1/speak"))
    assert (status, json.loads(body)["err_code"], headers["dg-error"]) == (408, "REQUEST_TIMEOUT", "Request timeout")


@pytest.mark.parametrize("status, kind", [(400, "invalid_request_error"), (408, "invalid_request_error"),
                                          (422, "invalid_request_error"), (499, "invalid_request_error"),
                                          (429, "rate_limit_error"), (500, "server_error"), (503, "server_error")])
def test_the_error_type_follows_the_status_class(status, kind):
    assert error_type(status) == kind
