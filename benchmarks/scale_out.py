"""Scale-out benchmark: one Chorus server against replicas behind Ray Serve, on one machine.

Three systems, one after the other, each alone on the machine, the same texts and client as the
serving benchmark (benchmarks/serving.py):

- `direct`: `chorus serve`, pinned to CPU 0 (`taskset`): one replica as it runs without Ray;
- `ray-1`: `chorus serve --replicas 1`, its replica (and engine core) pinned to CPU 0: the
  direct server plus Serve's proxy, whose TTFA against `direct` at one stream is the proxy's cost;
- `ray-2`: `chorus serve --replicas 2`, replica i (and its core) pinned to CPU i.

Ray's own processes (proxy, controller) and the load generator float over every CPU, as they
would beside replicas on a real node. Per system: closed-loop levels, capacity by the serving
criteria (every level up to it ≥ 99 % of requests admitted and viable at a 200 ms buffer, p95
TTFA ≤ 250 ms), each level a warm-up and a measured window as the serving benchmark's:

    python -m benchmarks.scale_out                    # joe, levels 1-8, ~20 min on 2 cores
    python -m benchmarks.scale_out --quick            # levels 1 and 2, 3 s windows: the smoke test
"""
from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from benchmarks.http_drivers import chorus_driver
from benchmarks.serving import level_record, short_line, workload
from benchmarks.server_process import HOST, ServerProcess, free_port
from benchmarks.serving_metrics import serving_capacity
from benchmarks.trace import RequestTrace
from benchmarks.workloads import LevelTiming, add_level_args, closed_loop

SYSTEMS = ("direct", "ray-1", "ray-2")
QUICK = dict(concurrency=[1, 2], ramp_seconds=1.0, level_seconds=3.0, drain_seconds=10.0, settle_seconds=5.0)
# Targets of the scale-out issue (#16).
MIN_SCALING = 1.5
MAX_PROXY_TTFA_MS = 10.0


def replica_count(system: str) -> int:
    return 1 if system == "direct" else int(system.split("-")[1])


def start(system: str, args: argparse.Namespace) -> ServerProcess:
    port = free_port()
    serve = [sys.executable, "-m", "api.cli", "serve", "--host", HOST, "--port", str(port), "--model", args.model,
             "--num-threads", "1", *shlex.split(args.server_flags)]
    if system == "direct":
        return ServerProcess(system, ["taskset", "-c", "0", *serve], port, "/ready")
    # NOTE: each replica asks Ray for no CPU: Ray's CPU count is logical, and the pinning below is
    # what limits a replica to its core.
    command = [*serve, "--replicas", str(replica_count(system)), "--replica-cpus", "0"]
    return ServerProcess(system, command, port, "/ready", startup_timeout_s=600)


def engine_cores_under(root: int) -> list[int]:
    """The engine-core processes among `root`'s descendants, oldest first."""
    found = subprocess.run(["pgrep", "-f", "chorus-engine-core"], capture_output=True, text=True).stdout.split()
    session = os.getsid(root)
    return sorted((int(pid) for pid in found if os.getsid(int(pid)) == session), key=_start_time)


def stat_fields(pid: int) -> list[str]:
    """/proc/PID/stat's fields after the command name (which may hold spaces): state, ppid, ..."""
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()


def _start_time(pid: int) -> int:
    return int(stat_fields(pid)[19])


def parent_pid(pid: int) -> int:
    return int(stat_fields(pid)[1])


def pin_replicas(server: ServerProcess, expected: int) -> list[dict]:
    """Pins replica i's process (all its threads) and its engine core to CPU i; returns the pins."""
    deadline = time.monotonic() + 60
    while len(cores := engine_cores_under(server.pid)) < expected:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{server.name}: {len(cores)} engine cores, expected {expected}")
        time.sleep(0.5)
    pins = []
    for cpu, core in enumerate(cores):
        replica = parent_pid(core)
        for pid in (replica, core):
            subprocess.run(["taskset", "-a", "-p", "-c", str(cpu), str(pid)], check=True, capture_output=True)
        pins.append({"cpu": cpu, "replica_pid": replica, "core_pid": core})
    return pins


async def measure(system: str, args: argparse.Namespace) -> dict:
    texts = workload(args.voice)
    with start(system, args) as server:
        pins = pin_replicas(server, replica_count(system)) if system != "direct" else [{"cpu": 0}]
        driver = chorus_driver(server.base_url, args.model, "pcm")
        await driver.start()
        try:
            for request in texts[:2]:  # warm-up, not recorded
                await driver.run(request, RequestTrace(time.monotonic(), driver.sample_rate))
            requests = itertools.cycle(texts)
            levels = []
            for n in args.concurrency:
                settle = server.wait_idle(args.settle_seconds)
                result = await closed_loop(driver, requests, n, LevelTiming.from_args(args))
                record = level_record(n, result, settle)
                record.pop("traces")
                print(short_line(system, f"x{n}", record), file=sys.stderr)
                levels.append(record)
        finally:
            await driver.close()
    return {"system": system, "replicas": replica_count(system), "pins": pins, "closed_loop": levels,
            "capacity_streams": serving_capacity(levels)}


def targets(systems: dict[str, dict]) -> list[dict]:
    rows = []
    if "direct" in systems and "ray-2" in systems:
        one, two = systems["direct"]["capacity_streams"], systems["ray-2"]["capacity_streams"]
        ratio = two / one if one else None
        rows.append({"target": f"two one-core replicas' capacity ÷ one's >= {MIN_SCALING}",
                     "measured": ratio, "met": ratio is not None and ratio >= MIN_SCALING})
    if "direct" in systems and "ray-1" in systems:
        direct, proxied = systems["direct"]["closed_loop"][0], systems["ray-1"]["closed_loop"][0]
        for q in ("p50", "p95"):
            added = None
            if direct[f"ttfa_{q}"] is not None and proxied[f"ttfa_{q}"] is not None:
                added = 1000 * (proxied[f"ttfa_{q}"] - direct[f"ttfa_{q}"])
            rows.append({"target": f"proxy's added TTFA {q} at {direct['load']:g} stream(s), ms"
                                   + (f" <= {MAX_PROXY_TTFA_MS:g}" if q == "p95" else ""),
                         "measured": added, "met": None if q == "p50" else (added is not None and added <= MAX_PROXY_TTFA_MS)})
    return rows


def markdown(report: dict) -> str:
    lines = [f"# Scale-out benchmark, {report['started_at']}", "", f"`{report['command']}`", "", report["machine"], "",
             "| system | replicas (a CPU each) | load | requests | TTFA p50 / p95 ms | viable % (200 ms) | 429 % | audio s per wall s |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for system in report["systems"]:
        for level in system["closed_loop"]:
            ttfa = " / ".join("–" if level[k] is None else f"{1000 * level[k]:.0f}" for k in ("ttfa_p50", "ttfa_p95"))
            lines.append(f"| {system['system']} | {system['replicas']} | {level['load']:g} | {level['requests']} | {ttfa} | "
                         f"{level['viable_pct_200ms'] or 0:.1f} | {level['refused_pct'] or 0:.1f} | "
                         f"{level['audio_s_per_wall_s']:.2f} |")
    lines += ["", "Capacity (streams): " + ", ".join(f"{s['system']} {s['capacity_streams']:g}" for s in report["systems"]) + ".",
              "", "| target | measured | met |", "| --- | ---: | :---: |"]
    for row in report["targets"]:
        measured = "–" if row["measured"] is None else f"{row['measured']:.2f}"
        met = "–" if row["met"] is None else ("✓" if row["met"] else "✗")
        lines.append(f"| {row['target']} | {measured} | {met} |")
    return "\n".join(lines) + "\n"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scale_out", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--systems", nargs="+", choices=SYSTEMS, default=list(SYSTEMS))
    parser.add_argument("--model", default="joe")
    parser.add_argument("--voice", default="joe")
    parser.add_argument("--server-flags", default="", help="more `chorus serve` flags for every system, one string")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 2, 3, 4, 6, 8])
    add_level_args(parser)
    parser.add_argument("--settle-seconds", type=float, default=20.0)
    parser.add_argument("--quick", action="store_true", help=f"the smoke test's settings: {QUICK}")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args(argv)
    if args.quick:
        for name, value in QUICK.items():
            setattr(args, name, value)
    if os.cpu_count() < max(replica_count(s) for s in args.systems):
        parser.error("each replica needs a CPU of its own")
    return args


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    started = datetime.now(timezone.utc)
    systems = [asyncio.run(measure(system, args)) for system in args.systems]
    by_name = {s["system"]: s for s in systems}
    report = {"started_at": started.isoformat(timespec="seconds"),
              "command": "python -m benchmarks.scale_out " + " ".join(sys.argv[1:] if argv is None else argv),
              "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end",
              "systems": systems, "targets": targets(by_name)}
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / f"scale-out-{started.strftime('%Y-%m-%d-%H%M')}"
    stem.with_suffix(".json").write_text(json.dumps(report, indent=1))
    stem.with_suffix(".md").write_text(markdown(report))
    print(markdown(report))
    return report


if __name__ == "__main__":
    main()
