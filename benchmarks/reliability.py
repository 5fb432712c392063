"""Reliability of `chorus serve` (started on 127.0.0.1 by this script) as hostile and unlucky
clients find it:

    python -m benchmarks.reliability            # joe: storm of 1,000, 10-minute soak
    python -m benchmarks.reliability --quick    # 50 abandoned, a 20 s soak (the smoke test)

- storm: `--storm-requests` speech requests, `--storm-concurrency` at a time, each abandoned
  0-1.5 s after it was sent (before or during its audio); then, within a second of the last
  client leaving, one ordinary request: its time to first audio against the idle one before the
  storm, the seconds until the engine holds no KV block, the API process's RSS before and after;
- core kill: SIGKILL of the engine core while an SSE stream plays: how long until that client
  is told (an error event), and until /ready answers 200 again;
- soak: `--soak-workers` closed-loop clients for `--soak-seconds` (eval sentences, pcm, read
  whole; a 429 is counted as refused and retried after its Retry-After): requests, errors, and
  each process's RSS slope (MB a minute) after the first third;
- drain: SIGTERM with an SSE and a chunked stream in flight: whether both complete, the exit
  code and how long the drain took.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import signal
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import httpx
import numpy as np

from benchmarks.data import eval_sentences
from benchmarks.report import machine_line, write_report_json
from benchmarks.server_process import chorus_server, free_port
from benchmarks.throughput import machine_info

QUICK = {"storm_requests": 50, "soak_seconds": 20.0}
# The reliability issue's targets.
TTFA_AFTER_STORM_RATIO, RSS_AFTER_STORM_RATIO = 2.0, 1.10
TOLD_AFTER_KILL_S, READY_AFTER_KILL_S, RSS_SLOPE_MB_PER_MIN = 1.0, 30.0, 0.5
RSS_SAMPLE_SECONDS = 5.0


def speech(text: str, **extra) -> dict:
    return {"model": "tts-1", "voice": "alloy", "input": text, "response_format": "pcm", **extra}


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def shm_files(pid: int) -> int:
    """Shared-memory segments the process holds open (torch's tensor sharing leaves these)."""
    count = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            count += os.readlink(fd).startswith("/dev/shm/torch_")
        except OSError:
            pass
    return count


def core_pid(server) -> int:
    """The newest engine core the server started (it logs each one's pid)."""
    pids = re.findall(r"engine core process started: pid (\d+)", server.log_tail(100_000))
    return int(pids[-1])


def metric(text: str, name: str) -> float:
    match = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    return float(match.group(1)) if match else 0.0


async def time_to_first_audio(client: httpx.AsyncClient, text: str) -> float:
    started, first = time.monotonic(), None
    async with client.stream("POST", "/v1/audio/speech", json=speech(text)) as response:
        response.raise_for_status()
        async for _ in response.aiter_bytes():
            first = first or time.monotonic() - started
    return first


async def abandoned(client: httpx.AsyncClient, text: str, leave_after: float) -> None:
    async def request() -> None:
        async with client.stream("POST", "/v1/audio/speech", json=speech(text)) as response:
            async for _ in response.aiter_bytes():
                pass

    try:
        await asyncio.wait_for(request(), leave_after)
    except (asyncio.TimeoutError, httpx.HTTPError):
        pass


async def storm(server, args, rng: random.Random) -> dict:
    sentences = eval_sentences()
    api_pid = server.pid
    async with httpx.AsyncClient(base_url=server.base_url, timeout=120) as client:
        idle = sorted([await time_to_first_audio(client, sentences[0]) for _ in range(5)])[2]
        rss_before = rss_mb(api_pid)
        gate = asyncio.Semaphore(args.storm_concurrency)

        async def one(i: int) -> None:
            async with gate:
                await abandoned(client, " ".join(rng.sample(sentences, 3)), rng.uniform(0.0, 1.5))

        started = time.monotonic()
        await asyncio.gather(*(one(i) for i in range(args.storm_requests)))
        left_at = time.monotonic()
        after = await time_to_first_audio(client, sentences[0])
        while metric((await client.get("/metrics")).text, "chorus_kv_blocks_used") and time.monotonic() - left_at < 120:
            await asyncio.sleep(0.1)
        blocks_free_after = time.monotonic() - left_at
        blocks = metric((await client.get("/metrics")).text, "chorus_kv_blocks_used")
    await asyncio.sleep(2)
    return {"requests": args.storm_requests, "concurrency": args.storm_concurrency,
            "storm_seconds": left_at - started, "ttfa_idle_s": idle, "ttfa_after_s": after,
            "ttfa_ratio": after / idle, "blocks_free_after_s": blocks_free_after, "kv_blocks_after": blocks,
            "api_rss_before_mb": rss_before, "api_rss_after_mb": rss_mb(api_pid),
            "api_rss_ratio": rss_mb(api_pid) / rss_before, "api_shm_files_after": shm_files(api_pid)}


def core_kill(server) -> dict:
    text = " ".join(eval_sentences()[:4])
    body = speech(text, stream_format="sse")
    with httpx.stream("POST", f"{server.base_url}/v1/audio/speech", json=body, timeout=120) as response:
        lines = response.iter_lines()
        next(line for line in lines if line.startswith("data:"))
        os.kill(core_pid(server), signal.SIGKILL)
        killed = time.monotonic()
        last = None
        for line in lines:
            if line.startswith("data:"):
                last = json.loads(line[5:])
        told = time.monotonic() - killed
    while httpx.get(f"{server.base_url}/ready").status_code != 200 and time.monotonic() - killed < 120:
        time.sleep(0.1)
    ready = time.monotonic() - killed
    return {"told_s": told, "told_with": None if last is None else last["type"], "ready_again_s": ready}


async def soak(server, args, rng: random.Random) -> dict:
    sentences = eval_sentences()
    pids = {"api": server.pid, "core": core_pid(server)}
    counts = {"requests": 0, "refused": 0, "errors": 0}
    samples: list[tuple[float, float, float]] = []
    until = time.monotonic() + args.soak_seconds

    async def worker(client: httpx.AsyncClient) -> None:
        while time.monotonic() < until:
            try:
                async with client.stream("POST", "/v1/audio/speech", json=speech(rng.choice(sentences))) as response:
                    if response.status_code == 429:  # at capacity: refused as designed, retried as told
                        counts["refused"] += 1
                        await asyncio.sleep(float(response.headers.get("Retry-After", 1)))
                        continue
                    response.raise_for_status()
                    async for _ in response.aiter_bytes():
                        pass
                counts["requests"] += 1
            except httpx.HTTPError:
                counts["errors"] += 1

    async def sampler() -> None:
        started = time.monotonic()
        while time.monotonic() < until:
            samples.append((time.monotonic() - started, rss_mb(pids["api"]), rss_mb(pids["core"])))
            await asyncio.sleep(RSS_SAMPLE_SECONDS)

    async with httpx.AsyncClient(base_url=server.base_url, timeout=120) as client:
        await asyncio.gather(sampler(), *(worker(client) for _ in range(args.soak_workers)))
    # Warm-up (allocator pools, caches filling) is the first third; the slope is over the rest.
    settled = [s for s in samples if s[0] >= args.soak_seconds / 3] or samples
    minutes = np.array([s[0] / 60 for s in settled])

    def slope(column: int) -> float:
        values = np.array([s[column] for s in settled])
        return float(np.polyfit(minutes, values, 1)[0]) if len(settled) > 1 else 0.0

    return {**counts, "workers": args.soak_workers, "seconds": args.soak_seconds,
            "api_rss_mb_per_min": slope(1), "core_rss_mb_per_min": slope(2),
            "api_rss_mb": [s[1] for s in samples], "core_rss_mb": [s[2] for s in samples]}


def drain(server) -> dict:
    import threading

    text = " ".join(eval_sentences()[4:6])
    results: dict[str, str] = {}
    streaming = {kind: threading.Event() for kind in ("sse", "chunked")}

    def read(kind: str) -> None:
        extra = {"stream_format": "sse"} if kind == "sse" else {}
        last = None
        try:
            for _ in range(10):  # a 429 (the engine at capacity) is retried as its Retry-After says
                with httpx.stream("POST", f"{server.base_url}/v1/audio/speech", json=speech(text, **extra),
                                  timeout=120) as response:
                    if response.status_code == 429:
                        time.sleep(float(response.headers.get("Retry-After", 1)))
                        continue
                    if response.status_code != 200:
                        results[kind] = f"refused ({response.status_code})"
                        return
                    pieces = response.iter_lines() if kind == "sse" else response.iter_bytes()
                    for piece in pieces:
                        streaming[kind].set()
                        if kind == "sse" and piece.startswith("data:"):
                            last = json.loads(piece[5:])["type"]
                    break
            else:
                results[kind] = "refused (429, 10 times)"
                return
            results[kind] = "complete" if kind == "chunked" or last == "speech.audio.done" else f"ended with {last}"
        except httpx.HTTPError as exc:
            results[kind] = f"cut ({type(exc).__name__})"
        finally:
            streaming[kind].set()

    readers = [threading.Thread(target=read, args=(kind,)) for kind in streaming]
    for reader in readers:
        reader.start()
    for started in streaming.values():  # both streams' audio flows before the signal
        started.wait(120)
    signalled = time.monotonic()
    server.signal(signal.SIGTERM)
    code = server.wait(120)
    exited = time.monotonic() - signalled
    for reader in readers:
        reader.join(10)
    return {"sse": results.get("sse"), "chunked": results.get("chunked"), "exit_code": code, "exit_s": exited}


def targets(report: dict) -> list[dict]:
    s, k, w, d = report["storm"], report["core_kill"], report["soak"], report["drain"]
    slope = max(w["api_rss_mb_per_min"], w["core_rss_mb_per_min"])
    return [
        {"target": "after the storm: next TTFA <= 2x idle", "measured": s["ttfa_ratio"],
         "met": s["ttfa_ratio"] <= TTFA_AFTER_STORM_RATIO},
        {"target": "after the storm: 0 KV blocks held", "measured": s["kv_blocks_after"], "met": s["kv_blocks_after"] == 0},
        {"target": "after the storm: API RSS within 10 % of before", "measured": s["api_rss_ratio"],
         "met": s["api_rss_ratio"] <= RSS_AFTER_STORM_RATIO},
        {"target": "core killed: in-flight client told within 1 s", "measured": k["told_s"],
         "met": k["told_s"] <= TOLD_AFTER_KILL_S and k["told_with"] == "error"},
        {"target": "core killed: /ready 200 again within 30 s", "measured": k["ready_again_s"],
         "met": k["ready_again_s"] <= READY_AFTER_KILL_S},
        {"target": "soak: RSS slope < 0.5 MB/min, each process", "measured": slope, "met": slope < RSS_SLOPE_MB_PER_MIN},
        {"target": "SIGTERM: SSE and chunked streams complete, exit 0", "measured": d["exit_code"],
         "met": d["sse"] == "complete" and d["chunked"] == "complete" and d["exit_code"] == 0},
    ]


def write_results(report: dict, command: str, started: datetime, out: Path) -> dict[str, Path]:
    paths = write_report_json(out, "reliability", started, report)
    s, k, w, d = report["storm"], report["core_kill"], report["soak"], report["drain"]
    lines = [f"# Reliability, {report['date']}", "", f"`{command}`", "",
             machine_line(report["machine"], f"model {report['model']}"), "",
             "| part | requests | errors | figure |", "| --- | ---: | ---: | --- |",
             f"| storm ({s['concurrency']} at a time, abandoned 0-1.5 s in) | {s['requests']} | – | next TTFA "
             f"{1000 * s['ttfa_after_s']:.0f} ms vs {1000 * s['ttfa_idle_s']:.0f} ms idle ({s['ttfa_ratio']:.2f}x); "
             f"blocks free {s['blocks_free_after_s']:.1f} s after; API RSS {s['api_rss_before_mb']:.0f} → "
             f"{s['api_rss_after_mb']:.0f} MB |",
             f"| core killed mid-stream | 1 | 1 ({k['told_with']}) | told in {1000 * k['told_s']:.0f} ms; /ready 200 "
             f"after {k['ready_again_s']:.1f} s |",
             f"| soak ({w['workers']} workers, {w['seconds']:.0f} s) | {w['requests']} | {w['errors']} | "
             f"{w['refused']} refused at capacity (429, retried); RSS slope API "
             f"{w['api_rss_mb_per_min']:+.2f} MB/min, core {w['core_rss_mb_per_min']:+.2f} MB/min |",
             f"| SIGTERM with 2 streams in flight | 2 | – | SSE {d['sse']}, chunked {d['chunked']}; exit "
             f"{d['exit_code']} after {d['exit_s']:.1f} s |",
             "", "| target | measured | met |", "| --- | ---: | :---: |"]
    for t in report["targets"]:
        lines.append(f"| {t['target']} | {t['measured']:.3g} | {'✓' if t['met'] else '✗'} |")
    paths["markdown"].write_text("\n".join(lines) + "\n")
    return paths


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="joe")
    parser.add_argument("--server-flags", default="", help="more `chorus serve` flags, one string")
    parser.add_argument("--storm-requests", type=int, default=1000)
    parser.add_argument("--storm-concurrency", type=int, default=32)
    parser.add_argument("--soak-seconds", type=float, default=600.0)
    parser.add_argument("--soak-workers", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="50 abandoned requests and a 20 s soak: the smoke test")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args(argv)
    if args.quick:
        args.storm_requests, args.soak_seconds = QUICK["storm_requests"], QUICK["soak_seconds"]
    command = "python -m benchmarks.reliability " + " ".join(argv if argv is not None else sys.argv[1:])
    started = datetime.now(timezone.utc)
    rng = random.Random(args.seed)
    flags = args.server_flags.split()
    report: dict = {"date": started.isoformat(timespec="seconds"), "command": command.strip(), "model": args.model}
    with chorus_server(args.model, free_port(), flags) as server:
        print("storm ...", file=sys.stderr)
        report["storm"] = asyncio.run(storm(server, args, rng))
        print("core kill ...", file=sys.stderr)
        report["core_kill"] = core_kill(server)
        print("soak ...", file=sys.stderr)
        report["soak"] = asyncio.run(soak(server, args, rng))
    with chorus_server(args.model, free_port(), flags) as server:
        print("drain ...", file=sys.stderr)
        report["drain"] = drain(server)
    report["machine"] = machine_info() | {"load_average_after": os.getloadavg()}
    report["targets"] = targets(report)
    print(write_results(report, command.strip(), started, args.out)["markdown"], file=sys.stderr)
    return report


if __name__ == "__main__":
    main()
