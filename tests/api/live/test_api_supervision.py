"""`chorus serve`'s API process killed (a segfault in a native library, the OOM killer): its
supervisor (api/http/supervisor.py) starts it again on the same port, says so in its log, on
/health and in /metrics, and leaves no engine core behind; past `--max-api-restarts` it exits
non-zero, a SIGTERM during a restart ends it at once, and a process that never became ready is
not started again."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import httpx

from benchmarks.server_process import ServerProcess, chorus_server, free_port
from model.tiny_random import ensure_tiny_random
from tests.api.live.test_graceful_shutdown import BODY, Stream

# As the graceful-shutdown tests run it: admission off, so two streams start on this small machine.
FLAGS = ("--device", "cpu", "--num-threads", "1", "--max-queue-delay", "none")
LONG = "A stream far longer than the moment it takes to kill its server. " * 40
READY_AGAIN_S = 60.0
# The supervisor holds no torch, numpy or app: tens of MB (the API process holds hundreds).
SUPERVISOR_RSS_MB = 64


def serve(*flags: str) -> ServerProcess:
    return chorus_server(str(ensure_tiny_random()), free_port(), [*FLAGS, *flags])


def core_pids(server: ServerProcess) -> list[int]:
    return [int(pid) for pid in re.findall(r"engine core process started: pid (\d+)", server.log_tail(100_000))]


def running(pid: int) -> bool:
    """Whether `pid` runs (a zombie waiting for its parent to reap it has exited)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        return int(next(line for line in status if line.startswith("VmRSS:")).split()[1]) / 1024


def wait_for(condition, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def ready(url: str) -> bool:
    try:
        return httpx.get(f"{url}/ready", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


def test_a_killed_api_process_is_started_again_on_the_same_port(chorus_cache):
    with serve() as server:
        with open(f"/proc/{server.pid}/maps") as maps:
            assert "libtorch" not in maps.read()
        assert rss_mb(server.pid) < SUPERVISOR_RSS_MB
        dead, [old_core] = server.api_pid, core_pids(server)
        assert dead != server.pid
        chunked = Stream(server.base_url, {**BODY, "input": LONG})
        sse = Stream(server.base_url, {**BODY, "input": LONG, "stream_format": "sse"})
        assert chunked.first.wait(60) and sse.first.wait(60)
        os.kill(dead, signal.SIGSEGV)
        chunked.join(30)
        sse.join(30)
        # Cut mid-body: the chunked response without its last chunk, the events without `done`.
        assert isinstance(chunked.error, httpx.TransportError), chunked.error
        assert isinstance(sse.error, httpx.TransportError), sse.error
        assert all(event["type"] != "speech.audio.done" for event in sse.events)

        assert wait_for(lambda: ready(server.base_url), READY_AGAIN_S), server.log_tail()
        log = server.log_tail(100_000)
        assert f"api process (pid {dead}) was killed by SIGSEGV" in log
        assert "restarting the api process in 0.5 s (restart 1)" in log
        assert server.api_pid != dead and not running(dead) and not running(old_core)
        assert len(core_pids(server)) == 2
        metrics = httpx.get(f"{server.base_url}/metrics").text
        assert re.search(r"^chorus_api_restarts_total 1\.0$", metrics, re.M)
        assert httpx.get(f"{server.base_url}/health").json() == {"status": "ok", "api_restarts": 1}
        response = httpx.post(f"{server.base_url}/v1/audio/speech", json={**BODY, "input": "Back again."}, timeout=60)
        assert response.status_code == 200 and len(response.content) > 0

        server.signal(signal.SIGTERM)
        assert server.wait(60) == 0


def test_past_its_restarts_the_supervisor_exits_non_zero(chorus_cache):
    with serve("--max-api-restarts", "0") as server:
        [core] = core_pids(server)
        os.kill(server.api_pid, signal.SIGKILL)
        assert server.wait(30) == 128 + signal.SIGKILL
        assert "giving up" in server.log_tail(100_000)
        assert wait_for(lambda: not running(core), 30)  # the core follows the process it served


def test_a_sigterm_while_the_api_process_is_restarted_exits_at_once(chorus_cache):
    with serve() as server:
        os.kill(server.api_pid, signal.SIGKILL)
        assert wait_for(lambda: "restarting the api process" in server.log_tail(100_000), 30)
        server.signal(signal.SIGTERM)
        assert server.wait(5) == 128 + signal.SIGKILL
        assert server.log_tail(100_000).count("api process started") == 1


def test_an_api_process_that_never_became_ready_is_not_started_again(chorus_cache, tmp_path):
    command = [sys.executable, "-m", "api.cli", "serve", "--model", str(tmp_path / "missing"), "--port",
               str(free_port()), *FLAGS]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    # 3: uvicorn's code for an app whose startup failed (the model folder does not exist).
    assert result.returncode == 3, result.stderr
    assert result.stderr.count("api process started") == 1
    assert "exited with 3 before it was ready" in result.stderr
