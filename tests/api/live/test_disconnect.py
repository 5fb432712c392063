"""A client that leaves mid-stream has its engine request aborted and its KV blocks freed."""
from __future__ import annotations

import re
import time

import httpx

from tests.api.conftest import speech_body

LONG_TEXT = "This sentence is long enough that its audio would take many seconds to generate in full."


def metric(text: str, name: str) -> float:
    match = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    return float(match.group(1)) if match else 0.0


def scrape(server, auth) -> str:
    return httpx.get(f"{server.url}/metrics", headers=auth).text


def test_disconnect_aborts_the_request_and_frees_its_blocks(server, auth):
    before = scrape(server, auth)
    with httpx.stream("POST", f"{server.url}/v1/audio/speech", json=speech_body(input=LONG_TEXT), headers=auth, timeout=60) as response:
        assert response.status_code == 200
        pieces = response.iter_bytes()
        next(pieces)
        time.sleep(0.5)  # the engine publishes stats every 0.25 s
        during = scrape(server, auth)
        assert metric(during, "chorus_kv_blocks_used") > 0
        assert metric(during, "chorus_streams_running") == 1
        pieces.close()
    left_at = time.monotonic()
    while time.monotonic() - left_at < 10:
        after = scrape(server, auth)
        if metric(after, "chorus_kv_blocks_used") == 0 and metric(after, "chorus_streams_running") == 0:
            break
        time.sleep(0.1)
    assert metric(after, "chorus_kv_blocks_used") == 0
    assert metric(after, "chorus_streams_running") == 0
    aborted = 'chorus_engine_requests_finished_total{reason="abort"}'
    assert metric(after, aborted) == metric(before, aborted) + 1
    disconnected = 'chorus_requests_total{outcome="disconnected"}'
    assert metric(after, disconnected) == metric(before, disconnected) + 1
    # Far less audio was generated than the request's budget: it stopped when the client left.
    budget_tokens = (0.5 + 0.05 * len(LONG_TEXT)) * 82
    generated = metric(after, "chorus_tokens_generated_total") - metric(before, "chorus_tokens_generated_total")
    assert generated < budget_tokens


def test_a_client_that_leaves_before_its_first_audio_costs_no_engine_work(chorus_cache, auth):
    import socket
    import threading

    from tests.api.conftest import start_server

    with start_server() as live:
        pool = live.app.state.planner.pool
        prepare, started = pool._prepare, threading.Event()

        def slow_prepare(*args, **kwargs):  # a long text's preparation, seen from outside
            started.set()
            time.sleep(1.0)
            return prepare(*args, **kwargs)

        pool._prepare = slow_prepare
        before = scrape(live, auth)
        host, port = live.url.removeprefix("http://").split(":")
        # A raw client: send the request, wait until its preparation runs, hang up.
        body = httpx.Request("POST", "/v1/audio/speech", json=speech_body(input=LONG_TEXT), headers=auth)
        head = f"POST /v1/audio/speech HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n" \
               f"Authorization: {auth['Authorization']}\r\nContent-Length: {len(body.content)}\r\n\r\n"
        with socket.create_connection((host, int(port))) as client:
            client.sendall(head.encode() + body.content)
            assert started.wait(10)
        disconnected = 'chorus_requests_total{outcome="disconnected"}'
        deadline = time.monotonic() + 5
        while metric(after := scrape(live, auth), disconnected) == metric(before, disconnected) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert metric(after, disconnected) == metric(before, disconnected) + 1
        time.sleep(1.5)  # the preparation that was running has finished by now: nothing may follow it
        after = scrape(live, auth)
        admitted = 'chorus_admission_requests_total{decision="admitted"}'
        assert metric(after, admitted) == metric(before, admitted)
        assert metric(after, "chorus_tokens_generated_total") == metric(before, "chorus_tokens_generated_total")
        pool._prepare = prepare
