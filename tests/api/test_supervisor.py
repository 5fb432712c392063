"""`chorus serve`'s supervisor without processes: which deaths of the API process are restarted,
after what delays, the status the supervisor exits with, and what it hands the API process
(tests/api/live/test_api_supervision.py runs it for real)."""
from __future__ import annotations

import os
import signal
import socket

from api.cli import build_parser
from api.http import supervisor
from api.http.supervisor import EXIT_ENGINE_FAILED, describe, exit_status, restart_policy, should_restart


def test_only_an_unexpected_death_of_a_process_that_served_is_restarted():
    for returncode in (-signal.SIGSEGV, -signal.SIGKILL, 1, 137):
        assert should_restart(returncode, was_ready=True)
    # A drained shutdown, and an engine core that kept dying: deliberate.
    assert not should_restart(0, was_ready=True)
    assert not should_restart(EXIT_ENGINE_FAILED, was_ready=True)
    # Before it ever served (a bad flag, a model that does not load), whatever the way it ended.
    for returncode in (-signal.SIGSEGV, 1, 2, EXIT_ENGINE_FAILED):
        assert not should_restart(returncode, was_ready=False)


def test_the_supervisor_exits_as_a_shell_reports_its_api_process():
    assert exit_status(0) == 0 and exit_status(EXIT_ENGINE_FAILED) == EXIT_ENGINE_FAILED
    assert exit_status(-signal.SIGKILL) == 137 and exit_status(-signal.SIGSEGV) == 139
    assert describe(1) == "exited with 1" and describe(-signal.SIGSEGV) == "was killed by SIGSEGV"


def test_restarts_wait_twice_as_long_each_time_up_to_the_flags_budget():
    flags = ["serve", "--max-api-restarts", "2", "--restart-window-seconds", "60"]
    policy = restart_policy(build_parser().parse_args(flags))
    assert [policy.next_delay(0.0), policy.next_delay(1.0), policy.next_delay(2.0)] == [0.5, 1.0, None]
    assert policy.next_delay(61.0) == 1.0  # the first restart has left the window; the second not yet
    assert restart_policy(build_parser().parse_args(["serve"])).max_restarts == 5
    assert restart_policy(build_parser().parse_args(["serve", "--max-api-restarts", "0"])).next_delay(0.0) is None


def test_the_api_process_reads_its_sockets_restarts_and_ready_pipe_from_the_environment(monkeypatch):
    for name in (supervisor.ENV_SOCKETS, supervisor.ENV_READY, supervisor.ENV_RESTARTS):
        monkeypatch.delenv(name, raising=False)
    assert not supervisor.supervised() and supervisor.inherited_sockets() is None
    assert supervisor.api_restarts() is None
    supervisor.report_ready()  # unsupervised: nobody to tell

    [listening] = supervisor.listen("127.0.0.1", 0)
    ready, ready_for_child = os.pipe()
    try:
        monkeypatch.setenv(supervisor.ENV_SOCKETS, str(os.dup(listening.fileno())))
        monkeypatch.setenv(supervisor.ENV_READY, str(ready_for_child))
        monkeypatch.setenv(supervisor.ENV_RESTARTS, "2")
        [inherited] = supervisor.inherited_sockets()
        assert inherited.getsockname() == listening.getsockname() and not inherited.get_inheritable()
        inherited.close()
        assert supervisor.api_restarts() == 2
        supervisor.report_ready()
        assert os.read(ready, 2) == b"r"  # and the API process's end is closed: end of file next
        assert os.read(ready, 1) == b""
    finally:
        os.close(ready)
        listening.close()


def test_the_supervisor_listens_on_one_port_for_every_address_of_its_host():
    sockets = supervisor.listen("localhost", 0)
    try:
        assert len({sock.getsockname()[1] for sock in sockets}) == 1
        assert all(sock.type == socket.SOCK_STREAM for sock in sockets)
    finally:
        for sock in sockets:
            sock.close()
