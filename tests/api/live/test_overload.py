"""A burst beyond capacity over HTTP: the excess gets 429 with Retry-After, the rest plays whole."""
from __future__ import annotations

import threading
import time

import httpx

from tests.api.conftest import speech_body, start_server

BYTES_PER_FRAME = 2048 * 2  # tiny-random: 2048 samples a frame, 16-bit pcm at its own 24 kHz
# One sentence (one engine request) whose output budget, about 6 s of audio, keeps a slot busy
# far longer than the queue delay: the two slots cannot free in time for anyone else.
TEXT = "A longer sentence without a stop that keeps both of the only two slots busy for a good while"


def refusals(metrics: str) -> int:
    counts = [float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines()
              if line.startswith(('chorus_admission_requests_total{decision="refused"}',
                                  'chorus_admission_requests_total{decision="refused_early"}'))]
    return int(sum(counts))


def test_a_burst_beyond_capacity_gets_429s_and_every_admitted_stream_completes(chorus_cache):
    with start_server(api_key=None, max_num_seqs=2, max_num_batched_tokens=64, max_queue_delay=0.25) as live:
        responses: list[tuple[int, dict, bytes]] = []
        lock = threading.Lock()

        def post():
            body = speech_body(input=TEXT)
            with httpx.stream("POST", f"{live.url}/v1/audio/speech", json=body, timeout=120) as response:
                data = response.read()
                with lock:
                    responses.append((response.status_code, dict(response.headers), data))

        threads = [threading.Thread(target=post) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        statuses = sorted(status for status, _, _ in responses)
        completed = f'chorus_requests_total{{outcome="completed"}} {float(statuses.count(200))}'
        # The engine's stats reach the API a few times a second: wait for the last snapshot. A
        # 429 comes from the engine's admission, or from the API before the prompt was prepared.
        deadline = time.monotonic() + 10
        while not (completed in (metrics := httpx.get(f"{live.url}/metrics").text)
                   and refusals(metrics) == statuses.count(429)):
            assert time.monotonic() < deadline, metrics
            time.sleep(0.1)

    assert len(responses) == 8 and set(statuses) == {200, 429}, statuses
    for status, headers, data in responses:
        if status == 429:
            assert int(headers["retry-after"]) >= 1
            error = httpx.Response(429, content=data).json()["error"]
            assert set(error) == {"message", "type", "param", "code"}
            assert (error["type"], error["code"]) == ("rate_limit_error", "overloaded")
        else:
            assert data and len(data) % BYTES_PER_FRAME == 0  # every frame's audio, whole
