"""`chorus-bench bench|profile` (also `python -m benchmarks`): the benchmarks' own entry point, which
works from an installed package (profile.sh and the evaluation texts are package data). Running
them as processes: live/test_cli_entry.py."""
from __future__ import annotations

import fnmatch
import sys
import types
from pathlib import Path

import pytest

from benchmarks import cli

REPO = Path(__file__).resolve().parents[2]


def test_bench_hands_every_further_flag_to_the_load_benchmark(monkeypatch):
    seen = []
    monkeypatch.setitem(sys.modules, "benchmarks.load", types.SimpleNamespace(main=seen.append))
    assert cli.main(["bench", "--quick", "--systems", "engine", "--help"]) == 0
    assert seen == [["--quick", "--systems", "engine", "--help"]]


def test_profile_runs_the_packaged_script_with_this_interpreter(monkeypatch):
    calls = []
    monkeypatch.setattr(cli.subprocess, "call", lambda command, env: calls.append((command, env)) or 3)
    assert cli.main(["profile", "--streams", "2", "--", "--device", "cpu"]) == 3
    (command, env), = calls
    assert command[0] == "bash" and Path(command[1]).name == "profile.sh" and Path(command[1]).is_file()
    assert command[2:] == ["--streams", "2", "--", "--device", "cpu"]
    assert env["PYTHON"] == sys.executable


def test_scripts_and_texts_ship_as_package_data():
    tomllib = pytest.importorskip("tomllib")
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert config["project"]["scripts"]["chorus-bench"] == "benchmarks.cli:main"
    package_data = config["tool"]["setuptools"]["package-data"]
    include = config["tool"]["setuptools"]["packages"]["find"]["include"]
    for package, files in {"benchmarks": ["profile.sh"], "evaluation": ["sentences.txt", "paragraphs.txt"]}.items():
        assert any(fnmatch.fnmatch(package, pattern) for pattern in include), package
        for name in files:
            assert (REPO / package / name).is_file()
            assert any(fnmatch.fnmatch(name, pattern) for pattern in package_data.get(package, [])), name
