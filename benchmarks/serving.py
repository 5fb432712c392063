"""Serving benchmark: Chorus's HTTP server against the peers a user would deploy instead: Piper's
own server, and Piper's voice streamed sentence by sentence (benchmarks/piper_sentence_server.py).

All serve the built-in voice (`chorus serve --model joe`, defaults otherwise; `python -m
piper.http_server` with the .onnx `joe` was distilled from; the sentence server with the same
.onnx), started and stopped by this script on 127.0.0.1, one after the other, never two at once.
Same texts (the 30 eval sentences and 10 paragraphs, cycled), same client
(`benchmarks/http_drivers.py`):

    python -m benchmarks.serving              # full run, ~40 min on the 2-core machine
    python -m benchmarks.serving --quick      # levels 1 and 2, a small burst, pcm: the smoke test

For Qwen3-TTS on a GPU, `--systems chorus vllm-omni --model <folder or random-qwen3-*> --voice
vivian` measures Chorus beside vLLM-Omni's own server on the same checkpoint folder
(benchmarks/vllm_omni_peer.py; vLLM and vLLM-Omni installed, benchmarks/GPU_RUN.md).

Per system: closed-loop levels (`--concurrency`), paced listeners (`--paced`: each listener asks
for its next reply once the last has played out, the figure an operator sizes by), Poisson
arrivals and bursts sized from the first system's capacity, and the input-length run (TTFA of one
sentence against all 30 in one input).

A closed-loop or paced level holds its nominal load through its measured window
(`benchmarks/workloads.py`): its clients start at random moments over `--ramp-seconds` (the
warm-up), then every one of them keeps sending for `--level-seconds` (the window, by default at
least twice the longest text's speech, so a reply of every length sent in its first half plays out
within it), then requests still open get at most `--drain-seconds`. Its figures are of the
requests sent in the window (the warm-up's stay in the JSON with `counted` false); beside the
nominal level it reports the mean clients that held load and the mean streams in flight over the
window, and the audio that arrived in it per second (`benchmarks/serving_metrics.py`). Every
level also records the CPU the server's processes and the whole machine used (a level of clients:
over its window; `benchmarks/cpu_meter.py`), and the audio served per CPU-second.
"""
from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import signal
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from tqdm import tqdm

from api.speech.spoken_budget import spoken_by
from benchmarks.corpus import BenchRequest
from benchmarks.http_drivers import HttpDriver, chorus_driver, connection_floor
from benchmarks.input_length import input_length_run
from benchmarks.cpu_meter import CpuMeter
from benchmarks.peers import piper_driver, piper_sentence_driver, piper_sentence_server, piper_server
from benchmarks.server_process import ServerProcess, chorus_server, free_port
from benchmarks.serving_metrics import PACED_CRITERIA, SERVING_CRITERIA, level_summary, serving_capacity, window_summary
from benchmarks.trace import RequestTrace, percentile
from benchmarks.vllm_omni_peer import vllm_omni_driver, vllm_omni_server
from benchmarks.workloads import (ClientLevel, LevelTiming, RunResult, add_level_args, burst, closed_loop, paced,
                                  poisson)
from evaluation import eval_sentences, paragraphs

SYSTEMS = ("chorus", "piper", "piper-sentences", "vllm-omni")
# A run without --systems: the built-in voice and its peers (vLLM-Omni serves Qwen3-TTS, on a GPU).
DEFAULT_SYSTEMS = ("chorus", "piper", "piper-sentences")
# What each peer answers (Piper's server: WAV files only); Chorus's formats in the input-length
# run are `--input-formats`.
PEER_FORMATS = {"piper": ("wav",), "piper-sentences": ("pcm",), "vllm-omni": ("pcm",)}
MIN_POISSON_REQUESTS = 20
# A window this many times the longest text's speech: a reply of every length sent in its first
# half plays out within it, so every length in the mix is sent and heard in the window.
WINDOW_TEXTS = 2.0
# Seconds of load: too short for Poisson arrivals to say anything, so none. Four listeners and 5 s
# windows: three of any four texts in a row are sentences (2-5 s of speech), so some listener hears
# its first reply out and asks again within the window (two listeners in 3 s could both still be
# listening when it ends, and the level would count no request).
QUICK = dict(concurrency=[1, 2], ramp_seconds=1.0, level_seconds=5.0, drain_seconds=10.0, poisson_fractions=[],
             burst_multiples=[2.0], input_length_reps=1, input_formats=["pcm"], settle_seconds=5.0, paced=[4])


def workload(voice: str) -> list[BenchRequest]:
    """The 40 texts in a fixed order, three eval sentences then a paragraph, so every stretch of
    a run mixes both lengths; the server sizes each request from its text."""
    sentences, paras = eval_sentences(), paragraphs()
    step = len(sentences) // len(paras)
    texts = [text for i, para in enumerate(paras) for text in (*sentences[i * step:(i + 1) * step], para)]
    return [BenchRequest(text, voice) for text in texts]


def window_check(texts: list[BenchRequest], window_s: float) -> dict:
    """The longest text's speech (as the server estimates it, api/speech/spoken_budget.py) against
    the window; a window too short to hear every length is said on stderr and in the report, not
    refused (the smoke test's is)."""
    longest = max(spoken_by(request.text).seconds for request in texts)
    covers = window_s >= WINDOW_TEXTS * longest
    if not covers:
        print(f"note: a {window_s:g} s window is under {WINDOW_TEXTS:g}× the longest text's speech "
              f"(~{longest:.0f} s): the longest replies are under-sampled", file=sys.stderr)
    return {"longest_text_speech_s": round(longest, 1), "window_covers_every_length": covers}


def start_server(system: str, args: argparse.Namespace) -> ServerProcess:
    if system == "chorus":
        return chorus_server(args.model, free_port(), args.server_flags.split())
    if system == "vllm-omni":
        return vllm_omni_server(checkpoint_folder(args.model), free_port(), args.vllm_omni_flags.split())
    return piper_server(free_port()) if system == "piper" else piper_sentence_server(free_port())


def driver_factory(system: str, server: ServerProcess, args: argparse.Namespace) -> Callable[[str], HttpDriver]:
    """The system's client for one response format."""
    if system == "piper":
        return lambda _: piper_driver(server.base_url)
    if system == "piper-sentences":
        return lambda _: piper_sentence_driver(server.base_url)
    if system == "vllm-omni":
        return lambda _: vllm_omni_driver(server.base_url, checkpoint_folder(args.model))
    return lambda response_format: chorus_driver(server.base_url, args.model, response_format)


def checkpoint_folder(model: str) -> Path:
    """The folder `chorus serve --model <model>` loads: a peer serves the very same files."""
    from model.loader import resolve_model_path

    return resolve_model_path(model)


def level_record(load: float, result: RunResult, settle_s: float) -> dict:
    """A level's figures and every trace; a trace is `counted` when the figures count it (a level
    of clients counts the requests sent in its window, `window` on the traces' clock); the caller
    adds the CPU it metered (`measure_system`; scale_out records none)."""
    level = result.level
    summary = window_summary(result.traces, level) if level else level_summary(result.traces, result.wall_seconds)
    window = {"window": [round(level.window.start, 4), round(level.window.end, 4)]} if level else {}
    return {"load": load, "wall_seconds": result.wall_seconds, "settle_seconds": settle_s, **summary, **window,
            "traces": [trace_record(t, level) for t in result.traces]}


def trace_record(trace: RequestTrace, level: ClientLevel | None) -> dict:
    return {"sent": round(trace.sent, 4), "counted": level is None or level.window.holds(trace.sent), "ok": trace.ok,
            "refused_at": trace.refused_at, "retry_after": trace.retry_after, "error": trace.error,
            "ended_at": None if trace.ended_at is None else round(trace.ended_at, 4),
            "chunks": [(round(a, 4), n) for a, n in trace.chunks]}


def short_line(name: str, label: str, level: dict) -> str:
    ttfa = level["ttfa_p95"]
    held = "" if level.get("held_clients") is None else f"  held {level['held_clients']:.1f}"
    return (f"  {name:18s} {label:>12s}{held} {level['requests']:4d} req  p95 TTFA "
            f"{'-' if ttfa is None else f'{1000 * ttfa:.0f} ms':>8s}  viable@200ms "
            f"{level['viable_pct_200ms'] or 0:5.1f} %  429 {level['refused_pct'] or 0:4.1f} %  "
            f"{level['audio_s_per_wall_s']:.2f} audio s/s  CPU {level['server_cpu_pct'] or 0:.0f} % "
            f"(machine {level['machine_cpu_pct'] or 0:.0f} %)  errors {sum(level['errors'].values())}")


def derived_loads(levels: list[dict], args: argparse.Namespace) -> dict:
    """Open-loop loads from a closed-loop sweep: bursts of `multiple` × capacity requests at once,
    and Poisson rates of `fraction` × the capacity's request rate by Little's law (each of
    `capacity` streams is busy for one request's mean audio length at a time). A capacity of 0
    counts as 1 stream, so that a system that passes no level still gets measured."""
    streams = max(serving_capacity(levels), 1)
    at_capacity = {lv["load"]: lv for lv in levels}.get(streams, levels[0])
    # A level that served nothing has no mean length; 1 s keeps the rates finite.
    mean_audio_s = at_capacity["mean_audio_s"] or 1.0
    return {"from_streams": streams, "mean_audio_s": mean_audio_s,
            "poisson_rates": [round(f * streams / mean_audio_s, 3) for f in args.poisson_fractions],
            "burst_multiples": list(args.burst_multiples),
            "burst_sizes": [max(1, round(m * streams)) for m in args.burst_multiples]}


def poisson_seconds(rate: float, args: argparse.Namespace) -> float:
    """A level's length, longer at low rates so that about MIN_POISSON_REQUESTS arrive, up to
    three levels' length (a percentile of a handful of requests says little)."""
    return min(max(args.level_seconds, MIN_POISSON_REQUESTS / rate), 3 * args.level_seconds)


async def measure_system(system: str, args: argparse.Namespace, loads: dict | None) -> dict:
    """Everything one system is measured on, with its server alone on the machine. `loads`
    (Poisson rates, burst sizes) come from the first system measured; None: this is it."""
    texts = workload(args.voice)
    with start_server(system, args) as server:
        driver_for = driver_factory(system, server, args)
        driver = driver_for("pcm")
        await driver.start()
        try:
            for request in texts[:2]:  # warm-up, not recorded; a server that cannot serve it stops the run
                await driver.run(request, RequestTrace(time.monotonic(), driver.sample_rate))

            async def measured(label: str, load: float, run, timing: LevelTiming | None = None) -> dict:
                """A level's record; a level of clients (`timing`) has its CPU metered over its window."""
                settle = server.wait_idle(args.settle_seconds)
                meter = CpuMeter(server.cpu_seconds)
                window = asyncio.create_task(meter.over(timing.ramp_s, timing.window_s)) if timing else None
                if window is None:
                    meter.start()
                with tqdm(desc=f"{system} {label}", unit="req", leave=False, file=sys.stderr) as bar:
                    result = await run(bar.update)
                if window is not None:
                    await window
                served = sum(t.audio_seconds for t in result.traces if t.ok)
                record = level_record(load, result, settle)
                if window is not None:  # the audio that arrived in the window, as the CPU was
                    served = record["audio_s_per_wall_s"] * timing.window_s
                record.update(meter.stop(served))
                print(short_line(system, label, record), file=sys.stderr)
                return record

            requests, timing = itertools.cycle(texts), LevelTiming.from_args(args)
            closed = [await measured(f"x{n}", n, lambda done, n=n: closed_loop(
                driver, requests, n, timing, args.seed, done), timing) for n in args.concurrency]
            listened = [await measured(f"{n} paced", n, lambda done, n=n: paced(
                driver, requests, n, timing, args.seed, done), timing) for n in args.paced]
            loads = loads or derived_loads(closed, args)
            poissons = [await measured(f"{rate:g}/s", rate, lambda done, rate=rate: poisson(
                driver, requests, rate, poisson_seconds(rate, args), args.drain_seconds, args.seed, done))
                for rate in loads["poisson_rates"]]
            bursts = [await measured(f"burst {n}", n, lambda done, n=n: burst(driver, requests, n, args.drain_seconds, done))
                      for n in loads["burst_sizes"]]
            if system == "chorus":  # the floor under its refusal times (Piper refuses nothing)
                for record in bursts:
                    server.wait_idle(args.settle_seconds)
                    floor = await connection_floor(server.base_url, "/health", int(record["load"]))
                    record["connection_floor_p99_s"] = percentile(floor, 99)
        finally:
            await driver.close()
        server.wait_idle(args.settle_seconds)
        formats = tuple(args.input_formats) if system == "chorus" else PEER_FORMATS[system]
        input_length = await input_length_run(driver_for, formats, args) if args.input_length_reps else []
    return {"system": system, "closed_loop": closed, "capacity_streams": serving_capacity(closed),
            "paced": listened, "paced_capacity": serving_capacity(listened, PACED_CRITERIA) if listened else None,
            "poisson": poissons, "bursts": bursts, "input_length": input_length, "loads": loads}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.serving", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--systems", nargs="+", choices=SYSTEMS, default=list(DEFAULT_SYSTEMS),
                        help="in this order; the first one's capacity sizes the Poisson rates and bursts of all")
    parser.add_argument("--model", default="joe", help="the model `chorus serve` loads (Piper always serves joe's teacher)")
    parser.add_argument("--voice", default="joe")
    parser.add_argument("--server-flags", default="",
                        help="more `chorus serve` flags, one string (A/B runs), e.g. \"--num-threads 2\"")
    parser.add_argument("--vllm-omni-flags", default="",
                        help="more `vllm serve <folder> --omni` flags, one string (e.g. its Qwen3-TTS --deploy-config)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64])
    add_level_args(parser)
    parser.add_argument("--settle-seconds", type=float, default=30.0,
                        help="before each level, wait at most this long for the server to go idle")
    parser.add_argument("--paced", type=int, nargs="*", default=[16, 32, 48, 64],
                        help="paced-listener levels: listeners, each asking for its next reply once the last has played out")
    parser.add_argument("--poisson-fractions", type=float, nargs="*", default=[0.5, 1.0, 1.5],
                        help="Poisson rates as fractions of the capacity's request rate")
    parser.add_argument("--burst-multiples", type=float, nargs="*", default=[2.0, 4.0],
                        help="bursts of this many times the capacity's streams, sent at once")
    parser.add_argument("--input-length-reps", type=int, default=3, help="repetitions of the input-length run (0 skips it)")
    parser.add_argument("--input-formats", nargs="+", choices=("pcm", "wav", "mp3"), default=["pcm", "mp3"],
                        help="Chorus's formats in the input-length run (Piper: wav)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help=f"the smoke test's settings: {QUICK}")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    parser.add_argument("--no-plot", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        for name, value in QUICK.items():
            setattr(args, name, value)
    return args


async def run_all(args: argparse.Namespace) -> dict:
    systems, loads, texts = [], None, workload(args.voice)
    window = window_check(texts, args.level_seconds)
    for system in args.systems:
        systems.append(await measure_system(system, args, loads))
        loads = systems[0]["loads"]
    criteria = SERVING_CRITERIA
    return {"criteria": {"min_viable_pct": criteria.min_viable_pct, "max_ttfa_p95_s": criteria.max_ttfa_p95_s,
                         "min_held_pct": criteria.min_held_pct, "client_buffer_ms": 200},
            "workload": {"texts": len(texts), "model": args.model, "voice": args.voice,
                         "ramp_seconds": args.ramp_seconds, "level_seconds": args.level_seconds,
                         "drain_seconds": args.drain_seconds, **window},
            "systems": systems}


def main(argv: list[str] | None = None) -> dict:
    from benchmarks.serving_report import write_serving_results

    args = parse_args(argv)
    # NOTE: the servers run in their own sessions, so a terminal's Ctrl-C does not reach them;
    # a SIGTERM becomes SystemExit here so that leaving each server's `with` stops it.
    previous = signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    started_at, load_before = datetime.now(timezone.utc), os.getloadavg()
    try:
        report = asyncio.run(run_all(args))
    finally:
        signal.signal(signal.SIGTERM, previous)
    command = "python -m benchmarks.serving " + " ".join(sys.argv[1:] if argv is None else argv)
    paths = write_serving_results(report, command, started_at, args.out, plot=not args.no_plot, load_before=load_before)
    print(paths["markdown"].read_text())
    return report


if __name__ == "__main__":
    main()
