"""Clients that send their request slowly (slowloris) are let go: a head that takes too long
closes the connection, a body that takes too long gets a 408; prompt ones are unaffected."""
from __future__ import annotations

import json
import socket
import time

import pytest

from api.app import create_app
from api.http.protocol import bounded_h11
from api.config.settings import ApiSettings
from model.tiny_random import ensure_tiny_random
from tests.api.conftest import FAST_SETTINGS, LiveServer, speech_body
from tests.engine.conftest import engine_config

TIMEOUT = 0.5


@pytest.fixture(scope="module")
def strict_server(chorus_cache):
    app = create_app(engine_config(str(ensure_tiny_random())),
                     ApiSettings(body_timeout_seconds=TIMEOUT, **FAST_SETTINGS))
    with LiveServer(app, http=bounded_h11(TIMEOUT)) as live:
        yield live


def connect(server) -> socket.socket:
    host, port = server.url.removeprefix("http://").split(":")
    client = socket.create_connection((host, int(port)))
    client.settimeout(10)
    return client


def read_all(client: socket.socket) -> bytes:
    data = b""
    while chunk := client.recv(65536):
        data += chunk
    return data


def test_a_head_that_never_completes_is_closed(strict_server):
    with connect(strict_server) as client:
        client.sendall(b"POST /v1/audio/speech HTTP/1.1\r\nHost: chorus\r\n")  # and then nothing
        started = time.monotonic()
        assert read_all(client) == b""  # closed by the server, no response
        assert TIMEOUT * 0.8 < time.monotonic() - started < TIMEOUT + 3


def test_a_body_that_stalls_is_a_408_in_openai_shape(strict_server):
    body = json.dumps(speech_body()).encode()
    with connect(strict_server) as client:
        client.sendall(b"POST /v1/audio/speech HTTP/1.1\r\nHost: chorus\r\nContent-Type: application/json\r\n"
                       b"Content-Length: %d\r\n\r\n" % len(body) + body[:10])
        response = read_all(client)
    head, _, payload = response.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408")
    error = json.loads(payload)["error"]
    assert (error["code"], error["type"]) == ("request_timeout", "invalid_request_error")  # the client's fault


def test_prompt_requests_on_one_kept_alive_connection_are_served(strict_server):
    body = json.dumps(speech_body(response_format="wav")).encode()
    request = (b"POST /v1/audio/speech HTTP/1.1\r\nHost: chorus\r\nContent-Type: application/json\r\n"
               b"Content-Length: %d\r\n\r\n" % len(body) + body)
    with connect(strict_server) as client:
        for _ in range(2):  # the second head arrives after the first response, within the deadline
            client.sendall(request)
            seen = b""
            while b"0\r\n\r\n" not in seen:  # the chunked body's end
                seen += client.recv(65536)
            assert seen.startswith(b"HTTP/1.1 200")
