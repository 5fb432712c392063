"""SIGTERM to `chorus serve`: it stops taking speech (/ready and new requests 503), lets the
streams in flight finish (server-sent events included), ends those the drain timeout cuts with
an error event, and exits 0."""
from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from model.tiny_random import ensure_tiny_random

BODY = {"model": "tts-1", "voice": "alloy", "response_format": "pcm", "seed": 3}


class Served:
    """`chorus serve` on the tiny random model in a child process, on a free port (admission off:
    the tests run two streams that admission on this small machine could refuse)."""

    def __init__(self, log: Path, *flags: str) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        self._log = log.open("w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "api.cli", "serve", "--model", str(ensure_tiny_random()), "--device", "cpu",
             "--port", str(self.port), "--num-threads", "1", "--max-queue-delay", "none", *flags],
            stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            assert self.process.poll() is None, log.read_text()
            try:
                if httpx.get(f"{self.url}/ready", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.3)
        raise AssertionError("the server did not become ready")

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self._log.close()


@pytest.fixture
def serve(chorus_cache, tmp_path):
    started = []

    def start(*flags: str) -> Served:
        started.append(Served(tmp_path / f"server-{len(started)}.log", *flags))
        return started[-1]

    yield start
    for served in started:
        served.close()


class Stream(threading.Thread):
    """Reads one speech response to its end on a thread; `first` is set once audio has come."""

    def __init__(self, url: str, body: dict) -> None:
        super().__init__(daemon=True)
        self.url, self.body = url, body
        self.first = threading.Event()
        self.events: list[dict] = []
        self.audio = bytearray()
        self.error: Exception | None = None
        self.start()

    def run(self) -> None:
        try:
            with httpx.stream("POST", f"{self.url}/v1/audio/speech", json=self.body, timeout=120) as response:
                assert response.status_code == 200
                if self.body.get("stream_format") == "sse":
                    for line in response.iter_lines():
                        if line.startswith("data:"):
                            self.events.append(json.loads(line[5:]))
                            self.first.set()
                else:
                    for piece in response.iter_bytes():
                        self.audio += piece
                        self.first.set()
        except Exception as exc:  # noqa: BLE001 - the test reads it
            self.error = exc
            self.first.set()


def test_sigterm_drains_every_stream_then_exits_0(serve):
    served = serve("--drain-timeout", "60")
    text = "The drain lets this speech finish before the server goes."
    sse = Stream(served.url, {**BODY, "input": text, "stream_format": "sse"})
    chunked = Stream(served.url, {**BODY, "input": text})
    assert sse.first.wait(60) and chunked.first.wait(60)
    served.process.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    ready = httpx.get(f"{served.url}/ready")
    assert ready.status_code == 503 and ready.json()["status"] == "draining"
    refused = httpx.post(f"{served.url}/v1/audio/speech", json={**BODY, "input": "Too late."})
    assert refused.status_code == 503 and refused.json()["error"]["code"] == "shutting_down"
    assert int(refused.headers["Retry-After"]) >= 1
    sse.join(60)
    chunked.join(60)
    assert sse.error is None and sse.events[-1]["type"] == "speech.audio.done"
    assert chunked.error is None and len(chunked.audio) > 0 and len(chunked.audio) % 2 == 0
    assert served.process.wait(30) == 0


def test_streams_the_drain_timeout_cuts_end_with_an_error_event(serve):
    served = serve("--drain-timeout", "1")
    long = "A stream far longer than the drain allows. " * 40
    sse = Stream(served.url, {**BODY, "input": long, "stream_format": "sse"})
    assert sse.first.wait(60)
    served.process.send_signal(signal.SIGTERM)
    sse.join(30)
    assert sse.error is None
    assert sse.events[-1]["type"] == "error" and "shutting down" in sse.events[-1]["error"]["message"]
    assert served.process.wait(30) == 0
    assert "drain timeout: ended 1 speech" in served.log.read_text()
