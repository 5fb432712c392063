"""The restart policy of a dead engine core: doubling delays, a bounded number per window."""
from __future__ import annotations

import pytest

from engine.client import _exit_description
from engine.restart_policy import RestartPolicy


def test_delays_double_up_to_the_cap_and_run_out_within_the_window():
    policy = RestartPolicy(max_restarts=4, window_seconds=60, first_delay=0.5, max_delay=1.5)
    assert [policy.next_delay(t) for t in (0, 1, 2, 3)] == [0.5, 1.0, 1.5, 1.5]
    assert policy.next_delay(4) is None  # a fifth death within 60 s: give up
    # Once the first restarts fall out of the window, there is room again.
    assert policy.next_delay(60.5) == 1.5


def test_no_restarts_gives_up_at_once():
    assert RestartPolicy(max_restarts=0).next_delay(0) is None


def test_invalid_policies_are_refused():
    with pytest.raises(ValueError):
        RestartPolicy(window_seconds=0)
    with pytest.raises(ValueError):
        RestartPolicy(first_delay=2, max_delay=1)


def test_exit_descriptions_name_the_signal():
    assert _exit_description(-9) == "was killed by SIGKILL"
    assert _exit_description(1) == "exited with code 1"
    assert _exit_description(None) == "closed its pipe and is still running"
