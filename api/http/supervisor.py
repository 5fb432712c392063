"""`chorus serve`'s supervisor: the API process is started again when it dies.

`chorus serve` runs as this supervisor. It binds the listening sockets itself and runs the API
process (`python -m api.cli serve` with the same flags) as its child, which serves on those
sockets, inherited (their numbers in $CHORUS_API_FDS). The port stays bound while no API process
runs, so a connection made while one starts waits in the listen backlog instead of being refused.

An API process that dies unexpectedly (killed by a signal, or a non-zero exit after it became
ready other than EXIT_ENGINE_FAILED) is started again after RestartPolicy's doubling delay, at
most `--max-api-restarts` times within `--restart-window-seconds`; one more death and the
supervisor exits with its status, for systemd or Kubernetes to act on. A deliberate exit is not
restarted, and the supervisor exits with its status at once: 0 (a drained shutdown),
EXIT_ENGINE_FAILED, and any exit of a process that never became ready (a bad flag, a model that
does not load: starting it again would fail again). The restarts so far reach each new process
as $CHORUS_API_RESTARTS (`/health`, `chorus_api_restarts_total`).

SIGTERM and SIGINT are passed on to the API process, which drains (api/http/server.py); the
supervisor then exits with its status. During a restart's delay they end the supervisor at once,
with the dead process's status.

The supervisor is the subreaper of what the API process started: when the API process dies, its
engine core (which notices its parent has gone) becomes the supervisor's child, and the next API
process starts only once every such process has exited (killed after ORPHAN_GRACE_SECONDS), so
that the old core's memory, on a GPU too, is free for the new one. The supervisor loads nothing
heavy (no torch, numpy or app): it is what must outlive whatever kills the API process. It needs
Linux (prctl, /proc).
"""
from __future__ import annotations

import argparse
import ctypes
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from engine.restart_policy import RestartPolicy

logger = logging.getLogger("chorus.supervisor")
# `chorus serve` exits with this when the engine core kept dying (api/app.py sets it): restarting
# the API process would not help, an outside supervisor must act.
EXIT_ENGINE_FAILED = 3
ENV_SOCKETS, ENV_READY, ENV_RESTARTS = "CHORUS_API_FDS", "CHORUS_API_READY_FD", "CHORUS_API_RESTARTS"
# How long the processes a dead API process leaves behind (its engine core) get to exit by themselves.
ORPHAN_GRACE_SECONDS = 10.0
_TICK_SECONDS = 0.1
# uvicorn's own default backlog: connections that wait while no API process accepts them.
BACKLOG = 2048
_SIGNALS = {signal.SIGTERM, signal.SIGINT, signal.SIGCHLD}
_PR_SET_PDEATHSIG, _PR_SET_CHILD_SUBREAPER = 1, 36


# --- The API process's side -----------------------------------------------------------------------


def supervised() -> bool:
    """Whether this process is an API process a supervisor started."""
    return ENV_SOCKETS in os.environ


def inherited_sockets() -> list[socket.socket] | None:
    """The listening sockets the supervisor handed this process (None: not supervised)."""
    if not supervised():
        return None
    sockets = [socket.socket(fileno=int(fd)) for fd in os.environ[ENV_SOCKETS].split(",")]
    for sock in sockets:
        sock.set_inheritable(False)  # the port is the supervisor's: no process started here holds it
    return sockets


def report_ready() -> None:
    """Tells the supervisor this process serves: from now on, an unexpected death is restarted."""
    if ENV_READY in os.environ:
        fd = int(os.environ.pop(ENV_READY))
        os.write(fd, b"r")
        os.close(fd)


def api_restarts() -> int | None:
    """How many times the supervisor has started an API process again (None: not supervised)."""
    return int(os.environ[ENV_RESTARTS]) if ENV_RESTARTS in os.environ else None


# --- What a death means ------------------------------------------------------------------------------


def should_restart(returncode: int, was_ready: bool) -> bool:
    """Whether an API process that ended with `returncode` (negative: killed by that signal) died
    unexpectedly, and is started again."""
    return was_ready and returncode not in (0, EXIT_ENGINE_FAILED)


def exit_status(returncode: int) -> int:
    """The supervisor's exit status for an API process's `returncode`: a death by signal N as
    128 + N, as a shell reports it."""
    return 128 - returncode if returncode < 0 else returncode


def describe(returncode: int) -> str:
    if returncode >= 0:
        return f"exited with {returncode}"
    try:
        return f"was killed by {signal.Signals(-returncode).name}"
    except ValueError:
        return f"was killed by signal {-returncode}"


# --- The supervisor ----------------------------------------------------------------------------------


def supervise(args: argparse.Namespace, flags: list[str]) -> int:
    """Serves `chorus serve`'s `flags` through API processes on sockets bound here; returns the
    exit status."""
    try:
        sockets = listen(args.host, args.port)
    except OSError as exc:
        logger.error("cannot listen on %s port %d: %s", args.host, args.port, exc)
        return 1
    command = [sys.executable, "-m", "api.cli", "serve", *flags]
    return Supervisor(sockets, command, restart_policy(args)).run()


def restart_policy(args: argparse.Namespace) -> RestartPolicy:
    """When the API process is started again: the engine core's doubling delays, within the API's
    own budget of restarts."""
    return RestartPolicy(args.max_api_restarts, args.restart_window_seconds)


def listen(host: str, port: int) -> list[socket.socket]:
    """Listening sockets on every address `host` resolves to, as uvicorn binds them."""
    addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    sockets = []
    for family, *_, address in dict.fromkeys(addresses):
        # NOTE: --port 0 takes the first address's free port for every address, as asyncio does.
        port = sockets[0].getsockname()[1] if sockets else address[1]
        sockets.append(socket.create_server((address[0], port), family=family, backlog=BACKLOG))
    for sock in sockets:
        logger.info("listening on %s", sock.getsockname()[:2])
    return sockets


class Supervisor:
    """Runs the API process on `sockets`, and again after an unexpected death as `policy` allows.
    Invariant: at most one API process runs at a time, and a new one starts only once the last
    one and every process it left behind have exited; the sockets stay open throughout."""

    def __init__(self, sockets: list[socket.socket], command: list[str], policy: RestartPolicy) -> None:
        self.sockets = sockets
        self.command = command
        self.policy = policy
        self.restarts = 0
        self._libc = ctypes.CDLL(None, use_errno=True)  # for Linux's prctl
        self._mask: set[signal.Signals] = set()

    def run(self) -> int:
        # NOTE: the signals wait blocked until `sigwaitinfo` takes them, each in its turn, so no
        # handler ever runs in the middle of starting or reaping a process.
        self._mask = signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
        self._libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        while True:
            process, ready = self._start()
            returncode, stopping = self._wait(process)
            was_ready = _read_ready(ready)
            logger.log(logging.INFO if returncode == 0 else logging.ERROR, "api process (pid %d) %s%s",
                       process.pid, describe(returncode), "" if was_ready else " before it was ready")
            if stopping or not should_restart(returncode, was_ready):
                return exit_status(returncode)
            delay = self.policy.next_delay(time.monotonic())
            if delay is None:
                logger.critical("the api process died again after %d restarts within %.0f s: giving up",
                                self.policy.max_restarts, self.policy.window_seconds)
                return exit_status(returncode)
            self.restarts += 1
            logger.warning("restarting the api process in %.1f s (restart %d)", delay, self.restarts)
            if not self._settle(delay):
                return exit_status(returncode)

    def _start(self) -> tuple[subprocess.Popen, int]:
        """Starts an API process; returns it and the end of the pipe on which it reports ready."""
        ready, ready_for_child = os.pipe()
        os.set_blocking(ready, False)
        fds = [sock.fileno() for sock in self.sockets]
        env = {**os.environ, ENV_SOCKETS: ",".join(map(str, fds)), ENV_READY: str(ready_for_child),
               ENV_RESTARTS: str(self.restarts)}
        parent = os.getpid()

        def in_child() -> None:
            signal.pthread_sigmask(signal.SIG_SETMASK, self._mask)
            # The API process (and through it, its core) dies with the supervisor, even by SIGKILL.
            self._libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            if os.getppid() != parent:  # the supervisor died before the line above
                os.kill(os.getpid(), signal.SIGKILL)

        try:
            process = subprocess.Popen(self.command, env=env, pass_fds=(*fds, ready_for_child), preexec_fn=in_child)
        finally:
            os.close(ready_for_child)
        logger.info("api process started: pid %d", process.pid)
        return process, ready

    def _wait(self, process: subprocess.Popen) -> tuple[int, bool]:
        """Waits for the API process to exit, passing SIGTERM and SIGINT on to it; returns its
        returncode and whether a signal asked the supervisor to stop."""
        stopping = False
        while (returncode := process.poll()) is None:
            signum = signal.sigwaitinfo(_SIGNALS).si_signo
            if signum != signal.SIGCHLD:
                logger.info("%s: passed on to the api process", signal.Signals(signum).name)
                stopping = True
                process.send_signal(signum)
        return returncode, stopping

    def _settle(self, delay: float) -> bool:
        """Waits `delay` seconds, and until every process the dead API process left behind has
        exited: those left after ORPHAN_GRACE_SECONDS are killed, and one that outlives twice that
        (stuck in the kernel) is given up on. False if a signal asked to stop meanwhile."""
        started, killed = time.monotonic(), False
        while True:
            waited = time.monotonic() - started
            left_behind = _reap()
            if waited >= delay and (not left_behind or waited >= 2 * ORPHAN_GRACE_SECONDS):
                return True
            if left_behind and not killed and waited >= ORPHAN_GRACE_SECONDS:
                killed = True
                for pid in _children():
                    logger.warning("killing pid %d, left behind by the dead api process", pid)
                    os.kill(pid, signal.SIGKILL)
            # A child's exit (SIGCHLD) ends the wait early; the tick bounds it otherwise.
            info = signal.sigtimedwait(_SIGNALS, _TICK_SECONDS)
            if info is not None and info.si_signo != signal.SIGCHLD:
                logger.info("%s during the restart's delay: exiting", signal.Signals(info.si_signo).name)
                return False


def _read_ready(ready: int) -> bool:
    """Whether the API process reported ready on this pipe (which is then closed)."""
    try:
        return os.read(ready, 1) == b"r"
    except BlockingIOError:  # nothing written, and a process it started still holds the far end
        return False
    finally:
        os.close(ready)


def _reap() -> bool:
    """Reaps the supervisor's children that have exited; whether any is still running."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            return True


def _children() -> list[int]:
    """The supervisor's child processes, from Linux's /proc."""
    me, pids = os.getpid(), []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            # After the command name in parentheses: state, ppid, ...
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if ppid == me:
            pids.append(int(stat.parent.name))
    return pids
