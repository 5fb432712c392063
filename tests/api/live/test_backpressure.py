"""A client that reads slowly gets its audio made only a bounded way ahead of what it has read,
and one that stops reading is let go with its engine request aborted; others are unaffected."""
from __future__ import annotations

import json
import socket
import time

import httpx

from tests.api.conftest import speech_body, start_server
from tests.api.live.test_disconnect import metric as read_metric
from tests.api.live.test_disconnect import scrape

# The stall timeout must outlast the pauses of a slow reader's flow: uvicorn resumes a paused
# response only once its transport drained from 64 KiB to 16 KiB.
BACKLOG_SECONDS, STALL_SECONDS = 2.0, 5.0
# 0.05 s of audio budget a character (the test servers'): about 40 s of audio.
TEXT = "A long reply that a slow client will read a little at a time. " * 13
BYTES_PER_SECOND = 24000 * 2  # pcm at 24 kHz


def metric(server, name: str) -> float:
    return read_metric(scrape(server, {}), name)


def slow_client(server) -> socket.socket:
    """Sends a pcm speech request on a socket with a small receive buffer, reads nothing yet."""
    host, port = server.url.removeprefix("http://").split(":")
    client = socket.socket()
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8192)  # before connecting: a small window
    client.connect((host, int(port)))
    body = json.dumps(speech_body(input=TEXT, seed=5)).encode()
    client.sendall(b"POST /v1/audio/speech HTTP/1.1\r\nHost: chorus\r\nContent-Type: application/json\r\n"
                   b"Content-Length: %d\r\n\r\n" % len(body) + body)
    return client


def test_a_slow_reader_pauses_its_generation_and_a_stalled_one_is_let_go(chorus_cache):
    settings = dict(audio_seconds_per_char=0.05, min_audio_seconds=0.5,
                    client_backlog_seconds=BACKLOG_SECONDS, stalled_client_seconds=STALL_SECONDS)
    with start_server(api_key=None, settings=settings) as live:
        client = slow_client(live)
        read = 0
        started = time.monotonic()
        while time.monotonic() - started < 6:  # 8 KB every 0.25 s: two thirds of real time
            read += len(client.recv(8192))
            time.sleep(0.25)
        made = metric(live, "chorus_audio_seconds_generated_total")
        heard = read / BYTES_PER_SECOND
        # Made: what was read, the backlog of the segment being read and of the next one (which
        # runs ahead), and what the sockets and the transport hold (~2.3 s of pcm here); without
        # backpressure all ~40 s would be made within these 6 s.
        assert made < heard + 2 * BACKLOG_SECONDS + 3, (made, heard)
        # One speech holds at most two engine requests (the segment being read, and the next,
        # opened once the current one's first chunk was read; api/speech/synthesis.py): whether the
        # earlier one has finished by now depends on the machine's speed, never more than two.
        assert 1 <= metric(live, "chorus_streams_running") <= 2
        # Another client meanwhile is served as usual.
        other = httpx.post(f"{live.url}/v1/audio/speech", json=speech_body(), timeout=60)
        assert other.status_code == 200 and len(other.content) > 0
        # Now it stops reading altogether: after the stall timeout it is let go.
        before = metric(live, 'chorus_requests_total{outcome="disconnected"}')
        deadline = time.monotonic() + STALL_SECONDS + 10
        while metric(live, "chorus_kv_blocks_used") and time.monotonic() < deadline:
            time.sleep(0.2)
        assert metric(live, "chorus_kv_blocks_used") == 0
        assert metric(live, 'chorus_requests_total{outcome="disconnected"}') == before + 1
        assert metric(live, "chorus_audio_seconds_generated_total") < 30
        client.close()
