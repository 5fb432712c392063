"""engine/process_title.py: the engine core is named `chorus-engine-core` even where setproctitle
alone names nothing (its first environment variable set again before the title, as importing
`ray` does to RAY_CLIENT_MODE in a spawned core under Ray Serve)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="/proc and the argument area are Linux's")

NAMED = """
import os
os.environ["CHORUS_FIRST"] = "set again"
from engine.process_title import set_process_title
set_process_title("chorus-engine-core")
with open("/proc/self/cmdline", "rb") as cmdline, open("/proc/self/comm") as comm:
    print(cmdline.read().split(b"\\0")[0].decode(), comm.read().strip())
"""


@pytest.mark.parametrize("first", [True, False])
def test_the_core_is_named_whatever_its_first_environment_variable_went_through(first):
    env = {"CHORUS_FIRST": "0", **os.environ} if first else {**os.environ, "CHORUS_FIRST": "0"}
    named = subprocess.run([sys.executable, "-c", NAMED], env=env, capture_output=True, text=True, check=True)
    # `pgrep -f chorus-engine-core` reads the first, `top` and `ps -o comm` the second (15 bytes).
    assert named.stdout.split() == ["chorus-engine-core", "chorus-engine-c"]
