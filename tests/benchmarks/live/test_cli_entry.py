"""`python -m benchmarks` and the packaged profile.sh, run as processes from outside the source tree
(without starting a server: help and a refused flag)."""
from __future__ import annotations

import subprocess
import sys
from importlib import resources


def test_profile_script_answers_help_and_refuses_unknown_flags(tmp_path):
    script = resources.files("benchmarks") / "profile.sh"
    shown = subprocess.run(["bash", str(script), "--help"], capture_output=True, text=True, cwd=tmp_path, timeout=30)
    assert shown.returncode == 0 and "chorus-bench profile" in shown.stdout
    refused = subprocess.run(["bash", str(script), "--bogus"], capture_output=True, text=True, cwd=tmp_path,
                             timeout=30)
    assert refused.returncode == 2 and "unknown flag --bogus" in refused.stderr


def test_module_entry_point_runs_outside_the_source_tree(tmp_path):
    shown = subprocess.run([sys.executable, "-m", "benchmarks", "--help"], capture_output=True, text=True,
                           cwd=tmp_path, timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert "bench" in shown.stdout and "profile" in shown.stdout
