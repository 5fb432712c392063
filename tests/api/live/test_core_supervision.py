"""The engine core process killed mid-stream: streams end with an error at once, /health and
/ready say why, the core is started again and serves; when restarts run out the server gives up."""
from __future__ import annotations

import json
import os
import re
import signal
import time
from dataclasses import replace

import httpx

from api.app import EXIT_ENGINE_FAILED, create_app
from api.config.settings import ApiSettings
from model.tiny_random import ensure_tiny_random
from tests.api.conftest import API_KEY, FAST_SETTINGS, LiveServer, speech_body
from tests.engine.conftest import engine_config

AUTH = {"Authorization": f"Bearer {API_KEY}"}
LONG = "This sentence is long enough that its audio takes a good while to generate in full. " * 3


def process_server(**config) -> LiveServer:
    engine = replace(engine_config(str(ensure_tiny_random()), mode="process"), num_threads=1, **config)
    return LiveServer(create_app(engine, ApiSettings(api_keys=(API_KEY,), **FAST_SETTINGS)))


def kill_core_mid_stream(live: LiveServer) -> tuple[dict, float]:
    """Starts an SSE speech, SIGKILLs the core once audio flows; returns the stream's last event
    and how long after the kill it came."""
    with httpx.stream("POST", f"{live.url}/v1/audio/speech", headers=AUTH, timeout=60,
                      json=speech_body(input=LONG, response_format="pcm", stream_format="sse")) as response:
        assert response.status_code == 200
        lines = response.iter_lines()
        assert any(line.startswith("data:") for line in lines)  # audio is flowing
        os.kill(live.engine.core_pid, signal.SIGKILL)
        killed = time.monotonic()
        events = [json.loads(line[5:]) for line in lines if line.startswith("data:")]
        return events[-1], time.monotonic() - killed


def test_a_killed_core_fails_its_streams_at_once_and_is_restarted(chorus_cache):
    with process_server() as live:
        last, after = kill_core_mid_stream(live)
        assert last["type"] == "error" and last["error"]["code"] == "synthesis_failed"
        assert after < 1.0
        # The restart waits half a second, then loads the model again: meanwhile the server says why.
        health = httpx.get(f"{live.url}/health")
        assert health.status_code == 503 and health.json()["status"] == "restarting"
        assert "SIGKILL" in health.json()["reason"]
        assert httpx.get(f"{live.url}/ready").status_code == 503
        refused = httpx.post(f"{live.url}/v1/audio/speech", json=speech_body(), headers=AUTH)
        assert refused.status_code == 503 and refused.json()["error"]["code"] == "engine_not_ready"
        deadline = time.monotonic() + 30
        while httpx.get(f"{live.url}/ready").status_code != 200 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert httpx.get(f"{live.url}/ready").status_code == 200
        assert httpx.get(f"{live.url}/health").json() == {"status": "ok"}
        response = httpx.post(f"{live.url}/v1/audio/speech", json=speech_body(), headers=AUTH, timeout=60)
        assert response.status_code == 200 and len(response.content) > 0
        metrics = httpx.get(f"{live.url}/metrics", headers=AUTH).text
        assert re.search(r"^chorus_engine_core_restarts_total 1\.0$", metrics, re.M)


def test_when_restarts_run_out_the_server_gives_up(chorus_cache):
    with process_server(max_core_restarts=0) as live:
        asked = []
        live.app.state.request_shutdown = lambda: asked.append(True)
        kill_core_mid_stream(live)
        deadline = time.monotonic() + 10
        while not asked and time.monotonic() < deadline:
            time.sleep(0.05)
        assert asked and live.app.state.exit_code == EXIT_ENGINE_FAILED
        health = httpx.get(f"{live.url}/health")
        assert health.status_code == 503 and health.json()["status"] == "failed"
        assert "SIGKILL" in health.json()["reason"]


def test_chorus_serve_exits_non_zero_when_its_core_cannot_be_kept_running(chorus_cache, tmp_path):
    import socket
    import subprocess
    import sys

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    log_path = tmp_path / "server.log"
    with log_path.open("w") as log:
        server = subprocess.Popen(
            [sys.executable, "-m", "api.cli", "serve", "--model", str(ensure_tiny_random()), "--device", "cpu",
             "--port", str(port), "--max-core-restarts", "0", "--num-threads", "1"],
            stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                assert server.poll() is None, log_path.read_text()
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/ready", timeout=2).status_code == 200:
                        break
                except httpx.TransportError:
                    time.sleep(0.3)
            core = int(re.search(r"engine core process started: pid (\d+)", log_path.read_text()).group(1))
            os.kill(core, signal.SIGKILL)
            assert server.wait(30) == EXIT_ENGINE_FAILED
        finally:
            if server.poll() is None:
                server.kill()
                server.wait()
    assert "was killed by SIGKILL" in log_path.read_text()
