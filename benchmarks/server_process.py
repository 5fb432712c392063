"""Servers the benchmark starts and stops itself: on 127.0.0.1, on a free port, one at a time.

A server runs in its own process group (session) so that stopping it also stops whatever it
started (`chorus serve`'s supervisor, its API process and engine core); its output goes to a log
file that is shown when it fails to come up.
"""
from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from typing import Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
_STOP_GRACE_S = 10.0
_IDLE_PROBE_S = 0.5


def free_port() -> int:
    """A port nothing listens on now (the OS picks it; another process could take it before the
    server binds, which on this machine only shows up as a server that fails to start)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


class ServerProcess:
    """One server process, used as a context manager. Invariant: inside the `with`, the server
    answered `ready_path` with 200 and `base_url` reaches it; on leaving (error or not) its whole
    process group has been stopped."""

    def __init__(self, name: str, command: list[str], port: int, ready_path: str,
                 startup_timeout_s: float = 300.0, cwd: Path = REPO_ROOT) -> None:
        self.name = name
        self.command = command
        self.port = port
        self.ready_path = ready_path
        self.startup_timeout_s = startup_timeout_s
        self.cwd = cwd
        self.base_url = f"http://{HOST}:{port}"
        self._process: subprocess.Popen | None = None
        self._log = None

    def __enter__(self) -> "ServerProcess":
        self._log = tempfile.NamedTemporaryFile("w+b", prefix=f"{self.name}-", suffix=".log")
        self._process = subprocess.Popen(self.command, cwd=self.cwd, stdout=self._log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    @property
    def pid(self) -> int:
        """The process started: for `chorus serve`, its supervisor (see `api_pid`)."""
        return self._process.pid

    @property
    def api_pid(self) -> int:
        """The process serving HTTP now: the newest API process `chorus serve`'s supervisor logged
        starting, or the process started for a server that logs none (a peer)."""
        pids = re.findall(r"api process started: pid (\d+)", self.log_tail(100_000))
        return int(pids[-1]) if pids else self.pid

    @property
    def exited(self) -> bool:
        """Whether the process started has exited (for `chorus serve`: its supervisor, or an
        unsupervised server whose API process died)."""
        return self._process.poll() is not None

    def signal(self, signum: int) -> None:
        """Sends `signum` to the process started alone (its children get what it passes on)."""
        self._process.send_signal(signum)

    def wait(self, timeout: float) -> int:
        """Waits for the server to exit by itself; returns its exit code."""
        return self._process.wait(timeout)

    def _wait_ready(self) -> None:
        import httpx

        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self._process.returncode} while starting:\n{self.log_tail()}")
            try:
                if httpx.get(self.base_url + self.ready_path, timeout=2.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        raise TimeoutError(f"{self.name} not ready after {self.startup_timeout_s:.0f} s:\n{self.log_tail()}")

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            _signal_group(self._process.pid, signal.SIGTERM)
            try:
                self._process.wait(_STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                _signal_group(self._process.pid, signal.SIGKILL)
                self._process.wait()
        if self._process is not None:
            # NOTE: the server's children (an engine core) share its group; one left behind by a
            # server that exited first would keep a core busy for the next system's run.
            _signal_group(self._process.pid, signal.SIGKILL)
        if self._log is not None:
            self._log.close()
            self._log = None

    def wait_idle(self, max_wait_s: float, busy_cores: float = 0.2) -> float:
        """Waits until the server's processes together use under `busy_cores` of CPU (work left
        from the last level: a request the client gave up on may still be running, and Piper
        cannot cancel one); returns the seconds waited, at most `max_wait_s`."""
        started = time.monotonic()
        while time.monotonic() - started < max_wait_s:
            before = _session_cpu_seconds(self._process.pid)
            time.sleep(_IDLE_PROBE_S)
            if _session_cpu_seconds(self._process.pid) - before < busy_cores * _IDLE_PROBE_S:
                break
        return time.monotonic() - started

    def cpu_seconds(self) -> float:
        """CPU time (user + system) its processes have used so far (those still running)."""
        return _session_cpu_seconds(self._process.pid)

    def log_tail(self, lines: int = 40) -> str:
        self._log.flush()
        self._log.seek(0)
        return "\n".join(self._log.read().decode(errors="replace").splitlines()[-lines:])


def _session_cpu_seconds(session: int) -> float:
    """CPU time (user + system) of every process in a session, from Linux's /proc."""
    ticks = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            # After the command name in parentheses: state, ppid, pgrp, session, ... utime (12th), stime.
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == session:
            ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def _signal_group(pid: int, signum: int) -> None:
    try:
        os.killpg(pid, signum)
    except ProcessLookupError:
        pass


def chorus_server(model: str, port: int, flags: Sequence[str] = (), checkout: Path | None = None) -> ServerProcess:
    """`chorus serve` of this checkout (not whatever `chorus` is installed), or of another one
    with its own `.venv` (`checkout`, for before/after runs), defaults otherwise unless `flags`
    (more `chorus serve` flags, for A/B runs) say so."""
    python = sys.executable if checkout is None else str(checkout / ".venv" / "bin" / "python")
    command = [python, "-m", "api.cli", "serve", "--host", HOST, "--port", str(port), "--model", model, *flags]
    return ServerProcess("chorus", command, port, "/ready", cwd=checkout or REPO_ROOT)
