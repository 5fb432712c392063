"""Malformed HTTP input against the live server: what depends on uvicorn's header encoding, or on
a route (the middlewares' own answers are tests/api/test_malformed_input.py's, in-process)."""
from __future__ import annotations

import asyncio
import json

import httpx
import pytest
import websockets

from api.http.quoting import quoted
from tests.api.test_malformed_input import (DEEP, DEEPGRAM_AUTH, QUERY_PARAMS, REFUSED_VALUES, assert_deepgram_error,
                                            nested)


@pytest.mark.parametrize("param", QUERY_PARAMS)
@pytest.mark.parametrize("value", REFUSED_VALUES)
def test_rest_speak_refuses_the_value_with_400_naming_the_parameter(server, param, value):
    # Live: the old answer to these was a 500 (a header value past Latin-1) or, for CR LF and
    # NUL, a connection closed with no answer at all (h11 refuses to send such a header).
    response = httpx.post(f"{server.url}/v1/speak?{param}={value}", json={"text": "Hi."}, headers=DEEPGRAM_AUTH)
    assert repr(param) in assert_deepgram_error(response, 400, "INVALID_QUERY_PARAMETER")


@pytest.mark.parametrize("param", QUERY_PARAMS)
@pytest.mark.parametrize("value", REFUSED_VALUES)
def test_the_socket_handshake_refuses_the_value_with_an_http_400(server, param, value):
    url = f"{server.url.replace('http', 'ws')}/v1/speak?{param}={value}"

    async def handshake():
        async with websockets.connect(url, additional_headers=DEEPGRAM_AUTH, open_timeout=10):
            pass

    with pytest.raises(websockets.exceptions.InvalidStatus) as info:
        asyncio.run(handshake())
    response = info.value.response
    assert response.status_code == 400 and response.headers["dg-error"] == "Invalid query parameter"
    body = json.loads(response.body)
    assert body["err_code"] == "INVALID_QUERY_PARAMETER" and repr(param) in body["err_msg"]


def test_a_route_error_quoting_the_request_keeps_it_out_of_the_headers(server):
    model = "aura-2-" + "é" * 100 + "-en"  # Latin-1, so past the query check, to the route's error
    response = httpx.post(f"{server.url}/v1/speak", params={"model": model}, json={"text": "Hi."}, headers=DEEPGRAM_AUTH)
    assert_deepgram_error(response, 400, "UNKNOWN_MODEL")
    assert all("é" not in value for value in response.headers.values())
    speed = "9" * 500
    response = httpx.post(f"{server.url}/v1/speak", params={"speed": speed}, json={"text": "Hi."}, headers=DEEPGRAM_AUTH)
    message = assert_deepgram_error(response, 400, "INVALID_QUERY_PARAMETER")
    assert quoted(speed) in message and speed not in message


def test_a_well_formed_request_is_still_spoken(server):
    response = httpx.post(f"{server.url}/v1/speak?model=aura-2-thalia-en&encoding=linear16&sample_rate=16000",
                          json={"text": "Hi."}, headers=DEEPGRAM_AUTH, timeout=60)
    assert response.status_code == 200 and response.headers["dg-model-name"] == "aura-2-thalia-en"
    assert response.content.startswith(b"RIFF")


def test_the_speak_route_bounds_a_body_of_any_declared_type(server):
    # text/plain is no JSON type, so the body check leaves it to the route, which parses it anyway.
    raw = '{"text": "Hi.", "x": ' + nested(DEEP) + "}"
    response = httpx.post(f"{server.url}/v1/speak", content=raw, headers={**DEEPGRAM_AUTH, "content-type": "text/plain"})
    assert "nests more than" in assert_deepgram_error(response, 400, "INVALID_JSON")
