"""A model that cannot time words before speaking them (Orpheus: the tiny random test model)
says so in /v1/audio/voices and refuses word timestamps with a clear 400; and timestamps come
only in the event stream."""
from __future__ import annotations

import asyncio

import httpx
import pytest
import websockets

from tests.api.conftest import API_KEY, speech_body
from tests.api.live.test_deepgram import socket_session, ws_url


def test_voices_say_which_timestamps_the_model_sends(server):
    listing = httpx.get(f"{server.url}/v1/audio/voices").json()
    assert listing["data"][0]["timestamps"] == []


@pytest.mark.parametrize("stream_format, message", [("sse", "cannot time words"), ("audio", "stream_format 'sse'")])
def test_word_timestamps_are_refused_naming_the_parameter(server, auth, stream_format, message):
    body = speech_body(stream_format=stream_format, timestamps="word")
    response = httpx.post(f"{server.url}/v1/audio/speech", json=body, headers=auth, timeout=60)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["param"] == "timestamps" and message in error["message"]


def test_unknown_timestamps_value_is_a_validation_error(server, auth):
    response = httpx.post(f"{server.url}/v1/audio/speech", json=speech_body(timestamps="char"), headers=auth)
    assert response.status_code == 400 and "timestamps" in response.json()["error"]["param"]


def test_socket_refuses_word_timestamps_before_accepting(server):
    speak = [{"type": "Speak", "text": "Hi."}, {"type": "Flush"}]
    auth = {"Authorization": f"Token {API_KEY}"}
    for query in ({"timestamps": "word"}, {"timestamps": "char"}):
        with pytest.raises(websockets.exceptions.InvalidStatus) as info:
            asyncio.run(socket_session(ws_url(server, **query), speak, "Flushed", headers=auth))
        assert info.value.response.status_code == 400
        assert b"timestamps" in info.value.response.body
    # Without the option (or with "none") the socket speaks as before.
    frames = asyncio.run(socket_session(ws_url(server, timestamps="none"), speak, "Flushed", headers=auth))
    assert frames[-1] == {"type": "Flushed", "sequence_id": 0}
    assert not any(isinstance(f, dict) and f["type"] == "Timestamps" for f in frames)
