"""`chorus-bench` (also `python -m benchmarks`): the benchmarks' own commands, kept out of the
server's `chorus` CLI so that nothing a server imports reaches the benchmarks.

    chorus-bench bench [flags of benchmarks/load.py]      # the load benchmark (`bench --help`)
    chorus-bench profile [--streams 8] [--seconds 30] [--out DIR] [-- chorus serve flags]

`profile` runs profile.sh, which ships inside this package, with this interpreter: it works from an
installed package as from the source tree. Both hand every further flag to their own parser."""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from importlib import resources


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="chorus-bench", description="Chorus benchmarks")
    sub = parser.add_subparsers(dest="command", required=True)
    # Each hands every further flag (its --help too) to the benchmark itself.
    sub.add_parser("bench", help="load benchmark: TTFA, viability, capacity against baselines", add_help=False)
    sub.add_parser("profile", help="profile the server under load with py-spy (flame graph, speedscope, "
                   "engine core dump)", add_help=False)
    return parser


def bench(rest: list[str]) -> int:
    from benchmarks.load import main as load_main

    load_main(rest)
    return 0


def profile(rest: list[str]) -> int:
    with resources.as_file(resources.files("benchmarks") / "profile.sh") as script:
        return subprocess.call(["bash", str(script), *rest], env={**os.environ, "PYTHON": sys.executable})


def main(argv: list[str] | None = None) -> int:
    args, rest = build_parser().parse_known_args(argv)
    return bench(rest) if args.command == "bench" else profile(rest)
