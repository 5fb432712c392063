"""Load benchmark: time to first audio, streaming viability and capacity, engine against baselines.

Every system gets the same seeded corpus, the same token count per request and the same audio
path; systems run one after the other in this one run, each alone on the machine:

    python -m benchmarks.load                          # engine + the three baselines, ~10 min
    python -m benchmarks.load --systems engine --poisson-rates 2 4 8
    python -m benchmarks.load --http http://127.0.0.1:8000 --systems engine   # a running server

Orpheus-shaped `tiny-random`, so it compares scheduling, not voices. The built-in voice `joe`
over HTTP against Piper's own server: `python -m benchmarks.serving`.
"""
from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import torch
from tqdm import tqdm

from api.config.engine_args import add_engine_args, engine_config_from_args
from benchmarks.capacity import CapacityCriteria, capacity
from benchmarks.corpus import BenchRequest, CorpusConfig, build_corpus
from benchmarks.drivers import Driver, EngineDriver
from benchmarks.http_drivers import chorus_driver
from benchmarks.trace import RequestTrace, summarize
from benchmarks.workloads import LevelTiming, RunResult, closed_loop, poisson
from model.families.orpheus.layout import FRAME_TOKENS

SYSTEMS = {"engine": "chorus engine", "sequential": "sequential", "static": "static batching",
           "cb": "transformers continuous batching"}
BURST_SECONDS = 10.0
# Short enough to be quick over HTTP too, where the server sizes the request from its text.
WARM_UP = BenchRequest("Warm up.", "tara", 4 * FRAME_TOKENS)
QUICK = dict(concurrency=[1, 2], level_seconds=3.0, drain_seconds=10.0, max_audio_seconds=0.5, corpus_size=16)


def build_driver(system: str, args: argparse.Namespace) -> Driver:
    config = engine_config_from_args(args)
    if system == "engine":
        return chorus_driver(args.http) if args.http else EngineDriver(config)
    from benchmarks.baselines import ContinuousBatchingDriver, GenerateBatchDriver, SharedModel

    shared = SharedModel(config.model)
    # The baselines decode SNAC like the engine's Orpheus family does, flags included.
    streaming = config.streaming.resolve(shared.codec.window_hints)
    if system == "cb":
        return ContinuousBatchingDriver(shared, streaming, config.scheduler.max_num_batched_tokens,
                                        max_context=2048, max_streams=max(args.concurrency))
    return GenerateBatchDriver(shared, streaming, 1 if system == "sequential" else max(args.concurrency),
                               SYSTEMS[system])


def level_record(load: float, result: RunResult, args: argparse.Namespace, criteria: CapacityCriteria) -> dict:
    summary = summarize(result.traces, result.wall_seconds, args.client_buffer_ms / 1000)
    return {"load": load, "wall_seconds": result.wall_seconds, **summary, "passes": criteria.passes(summary),
            "traces": [{"sent": round(t.sent, 4), "ok": t.ok, "chunks": [(round(a, 4), n) for a, n in t.chunks]}
                       for t in result.traces]}


async def sweep_system(system: str, corpus: list[BenchRequest], args: argparse.Namespace,
                       criteria: CapacityCriteria) -> dict:
    driver = build_driver(system, args)
    await driver.start()
    try:
        await driver.run(WARM_UP, RequestTrace(time.monotonic(), driver.sample_rate))  # not recorded
        levels = []
        for n in args.concurrency:
            with tqdm(desc=f"{driver.name} x{n}", unit="req", leave=False, file=sys.stderr) as bar:
                # NOTE: no warm-up: every client starts at once, so each sends from the level's first
                # moment to its last and the whole level is its window (summarize counts every request).
                timing = LevelTiming(0.0, args.level_seconds, args.drain_seconds)
                result = await closed_loop(driver, itertools.cycle(corpus), n, timing, on_done=bar.update)
            levels.append(level_record(n, result, args, criteria))
            print(f"  {driver.name:34s} x{n:<3d} " + short_line(levels[-1]), file=sys.stderr)
            if not levels[-1]["passes"] and not args.full_sweep:
                break
        record = {"system": driver.name, "key": system, "closed_loop": levels,
                  "capacity_streams": capacity([(lv["load"], lv) for lv in levels], criteria)}
        if system == "engine":
            record |= await open_loop_runs(driver, corpus, record["capacity_streams"], args, criteria)
        return record
    finally:
        await driver.close()


async def open_loop_runs(driver: Driver, corpus: list[BenchRequest], streams: float, args: argparse.Namespace,
                         criteria: CapacityCriteria) -> dict:
    """Poisson sweep (rates given on the command line) and a burst at twice the capacity, turned
    into a rate by Little's law: a stream at capacity is busy for one request's audio length."""
    mean_audio_s = statistics.mean(r.max_tokens for r in corpus) / args.tokens_per_audio_second
    runs = {"poisson": [], "burst": None}
    for rate in args.poisson_rates:
        result = await poisson(driver, itertools.cycle(corpus), rate, args.level_seconds, args.drain_seconds, args.seed)
        runs["poisson"].append(level_record(rate, result, args, criteria))
        print(f"  {driver.name:34s} {rate:g}/s " + short_line(runs["poisson"][-1]), file=sys.stderr)
    runs["capacity_rate"] = capacity([(lv["load"], lv) for lv in runs["poisson"]], criteria) if args.poisson_rates else None
    if streams and not args.no_burst:
        rate = 2 * streams / mean_audio_s
        result = await poisson(driver, itertools.cycle(corpus), rate, BURST_SECONDS, args.drain_seconds, args.seed)
        runs["burst"] = level_record(rate, result, args, criteria)
        print(f"  {driver.name:34s} burst {rate:.2f}/s " + short_line(runs["burst"]), file=sys.stderr)
    return runs


def short_line(level: dict) -> str:
    ttfa = level["ttfa_p95"]
    return (f"{level['requests']:4d} req  p95 TTFA {'-' if ttfa is None else f'{1000 * ttfa:.0f} ms':>8s}  "
            f"viable {level['viable_pct'] or 0:5.1f} %  {level['audio_s_per_wall_s']:.2f} audio s/s")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="chorus-bench bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    run = parser.add_argument_group("benchmark")
    run.add_argument("--systems", nargs="+", choices=list(SYSTEMS), default=list(SYSTEMS))
    run.add_argument("--http", default=None, help="measure a running server at this URL (127.0.0.1) instead of "
                     "an in-process engine")
    run.add_argument("--concurrency", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64])
    run.add_argument("--full-sweep", action="store_true", help="keep sweeping after a level misses the criteria")
    run.add_argument("--poisson-rates", type=float, nargs="*", default=[], help="requests per second")
    run.add_argument("--no-burst", action="store_true")
    run.add_argument("--level-seconds", type=float, default=20.0, help="how long clients keep sending per level")
    run.add_argument("--drain-seconds", type=float, default=15.0, help="then how long open requests may finish")
    run.add_argument("--client-buffer-ms", type=float, default=0.0)
    run.add_argument("--ttfa-target", type=float, default=1.0, help="p95 TTFA bound of capacity, seconds")
    run.add_argument("--corpus-size", type=int, default=400)
    run.add_argument("--max-audio-seconds", type=float, default=CorpusConfig().max_audio_seconds)
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--threads", type=int, default=2, help="torch threads of the baselines (engine: --num-threads)")
    run.add_argument("--quick", action="store_true", help="a few seconds of tiny load (smoke test)")
    run.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    run.add_argument("--no-plot", action="store_true")
    add_engine_args(parser)
    # The baselines run Orpheus checkpoints through transformers: the workload is Orpheus-shaped.
    parser.set_defaults(model="tiny-random")
    args = parser.parse_args(argv)
    if args.quick:
        for name, value in QUICK.items():
            setattr(args, name, value)
    args.tokens_per_audio_second = 82.0
    return args


async def run_all(args: argparse.Namespace) -> dict:
    corpus = build_corpus(args.corpus_size, CorpusConfig(seed=args.seed, max_audio_seconds=args.max_audio_seconds,
                                                         min_audio_seconds=min(1.0, args.max_audio_seconds)))
    criteria = CapacityCriteria(max_ttfa_p95_s=args.ttfa_target)
    systems = [await sweep_system(system, corpus, args, criteria) for system in args.systems]
    return {"criteria": {"min_viable_pct": criteria.min_viable_pct, "max_ttfa_p95_s": criteria.max_ttfa_p95_s,
                         "client_buffer_ms": args.client_buffer_ms},
            "corpus": {"size": len(corpus), "seed": args.seed, "max_audio_seconds": args.max_audio_seconds,
                       "mean_tokens": statistics.mean(r.max_tokens for r in corpus)},
            "systems": systems}


def main(argv: list[str] | None = None) -> dict:
    from benchmarks.report import write_results

    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    started_at, load_before = datetime.now(timezone.utc), os.getloadavg()
    report = asyncio.run(run_all(args))
    command = "python -m benchmarks.load " + " ".join(sys.argv[1:] if argv is None else argv)
    paths = write_results(report, command, started_at, args.out, plot=not args.no_plot, load_before=load_before)
    print(paths["markdown"].read_text())
    return report


if __name__ == "__main__":
    main()
