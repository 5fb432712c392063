"""Core-engine throughput: Chorus against transformers' continuous batching and static `generate`.

Every system runs in this one process, on the same tiny-random Llama, the same seeded prompts and
the same count of greedy tokens per stream, one after the other for each stream count, after a
short warm-up of its own. The engine runs its real path, streaming SNAC decode included. With
--repeats N the whole round runs N times and the table shows each system's median run.

    python -m benchmarks.throughput --streams 16 64 --prompt-len 40 --new-tokens 200
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import torch

ENGINE = "chorus engine"
GENERATE_BATCH = "transformers generate_batch"
STATIC_GENERATE = "transformers generate (static)"
BLOCK_SIZE = 16  # engine KV block size
HF_PAGE_SIZE = 256  # transformers' default page size, used to size its cache to the workload
MAX_BATCH_TOKENS = 512  # per-step token budget, the same for the engine and generate_batch
PRESETS = {
    "full": dict(streams=[16, 64], prompt_len=40, new_tokens=200),
    "quick": dict(streams=[2], prompt_len=8, new_tokens=14),
}
WARMUP_STREAMS, WARMUP_NEW_TOKENS = 2, 14  # 14 tokens: two whole frames, so the codec warms up too
STATS_KEPT = ("steps", "step_seconds", "forward_seconds", "codec_seconds", "overhead_fraction",
              "engine_overhead_fraction", "finished_by_reason", "audio_seconds_generated")
TARGETS_AT_STREAMS = 16
OVERHEAD_AT_STREAMS = 64

SETTINGS = (
    "Greedy, exactly the requested tokens per stream for every system. Engine: its real step path, "
    "streaming SNAC decode included, constrain_audio_tokens=True (the default), min_tokens = max_tokens; "
    "its overhead is step time outside the LM forward (backbone + output head): SNAC decode, sampling, "
    "scheduling, input preparation; the last column leaves the SNAC decode out too. generate_batch: "
    "eos_token_id=-1, cache sized to the workload (page 256, max_batch_tokens 512), timed from the "
    "first request created to the last one finished. Static generate: one left-padded batch, "
    "min_new_tokens = max_new_tokens. Tokens/s of the median of the repeats."
)


@dataclass(slots=True)
class Workload:
    """`streams` prompts of `prompt_len` byte-token ids drawn from `seed`, so every system and
    every run sees the same ids; each stream must be extended by exactly `new_tokens` tokens."""

    streams: int
    prompt_len: int
    new_tokens: int
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("streams", "prompt_len", "new_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")

    def prompts(self) -> list[list[int]]:
        rng = random.Random(self.seed)
        return [[rng.randrange(256) for _ in range(self.prompt_len)] for _ in range(self.streams)]


@dataclass(slots=True)
class Measurement:
    """One system's timed run of one workload: `tokens` new tokens, counted from the system's
    outputs, in `seconds` of wall time; `details` keeps every other raw figure of the run."""

    system: str
    streams: int
    tokens: int
    seconds: float
    details: dict = field(default_factory=dict)
    repeat: int = 0

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds


Runner = Callable[[Workload], Measurement]


def engine_runner(folder: str) -> Runner:
    from capacity.config import CapacityConfig
    from engine.config import EngineConfig
    from engine.core import EngineCore
    from memory.config import CacheConfig
    from model.config import ModelConfig
    from model.families.base import SpeechPrompt
    from model.loader import load_family
    from model.sampling import SamplingParams
    from scheduler.config import SchedulerConfig

    model_config = ModelConfig(model=folder, device="cpu")
    family = load_family(model_config)

    def run(work: Workload) -> Measurement:
        budget = max(MAX_BATCH_TOKENS, work.streams)
        # Room for every stream's whole sequence, and never less than one full step needs.
        num_blocks = max(
            work.streams * math.ceil((work.prompt_len + work.new_tokens) / BLOCK_SIZE),
            math.ceil(budget / BLOCK_SIZE),
        )
        config = EngineConfig(
            model=model_config,
            cache=CacheConfig(block_size=BLOCK_SIZE, num_blocks=num_blocks),
            scheduler=SchedulerConfig(max_num_seqs=work.streams, max_num_batched_tokens=budget),
            # Raw work: every stream admitted and stepped, whatever its listener.
            capacity=CapacityConfig(max_queue_delay=None, skip_slack_seconds=None),
            mode="inproc",
        )
        core = EngineCore(config, family=family)
        params = SamplingParams(temperature=0.0, max_tokens=work.new_tokens, min_tokens=work.new_tokens)
        started = time.perf_counter()
        for i, ids in enumerate(work.prompts()):
            core.add_request(f"stream-{i}", SpeechPrompt(token_ids=ids), params)
        finished = []
        while core.has_work:
            finished += [chunk for chunk in core.step() if chunk.finished]
        seconds = time.perf_counter() - started
        stats = core.stats
        details = {name: getattr(stats, name) for name in STATS_KEPT} | {
            "constrain_audio_tokens": model_config.constrain_audio_tokens,
            "num_blocks": num_blocks, "max_num_seqs": work.streams, "max_num_batched_tokens": budget,
        }
        return Measurement(ENGINE, work.streams, sum(c.metrics.output_tokens for c in finished), seconds, details)

    return run


def transformers_runners(folder: str) -> dict[str, Runner]:
    from transformers import ContinuousBatchingConfig, GenerationConfig, LlamaForCausalLM

    # NOTE: one model each: generate_batch swaps the attention implementation of the model it runs.
    static_model = LlamaForCausalLM.from_pretrained(folder).eval()
    batch_model = LlamaForCausalLM.from_pretrained(folder).eval()
    pad_id = static_model.config.eos_token_id

    def static_generate(work: Workload) -> Measurement:
        prompts = work.prompts()
        width = max(len(p) for p in prompts)
        ids = torch.tensor([[pad_id] * (width - len(p)) + p for p in prompts])
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
        started = time.perf_counter()
        with torch.inference_mode():
            out = static_model.generate(
                input_ids=ids, attention_mask=mask, max_new_tokens=work.new_tokens,
                min_new_tokens=work.new_tokens, do_sample=False, pad_token_id=pad_id,
            )
        seconds = time.perf_counter() - started
        return Measurement(STATIC_GENERATE, work.streams, out[:, width:].numel(), seconds, {
            "padding": "left", "min_new_tokens": work.new_tokens,
        })

    def generate_batch(work: Workload) -> Measurement:
        # NOTE: left to its defaults, the CPU cache is sized from a memory guess and takes tens of
        # seconds to allocate; sizing it to the workload, as the engine's is, keeps setup out of it.
        cb_config = ContinuousBatchingConfig(
            num_blocks=math.ceil(work.streams * (work.prompt_len + work.new_tokens) / HF_PAGE_SIZE) + 1,
            max_batch_tokens=MAX_BATCH_TOKENS,
        )
        gen_config = GenerationConfig(max_new_tokens=work.new_tokens, do_sample=False, eos_token_id=-1)
        started = time.perf_counter()
        results = batch_model.generate_batch(
            inputs=work.prompts(), generation_config=gen_config, continuous_batching_config=cb_config
        )
        call_seconds = time.perf_counter() - started
        outputs = list(results.values())
        # The span from the first request's creation to the last one's end leaves out building and
        # tearing down the manager, as the engine's figure leaves out building the core.
        span = max(o.lifespan[1] for o in outputs) - min(o.created_time for o in outputs)
        return Measurement(GENERATE_BATCH, work.streams, sum(len(o.generated_tokens) for o in outputs), span, {
            "call_seconds": call_seconds, "errors": [o.error for o in outputs if o.error], "eos_token_id": -1,
            "cb_num_blocks": cb_config.num_blocks, "cb_page_size": HF_PAGE_SIZE,
            "cb_max_batch_tokens": MAX_BATCH_TOKENS, "attn_implementation": batch_model.config._attn_implementation,
        })

    return {GENERATE_BATCH: generate_batch, STATIC_GENERATE: static_generate}


def measure_all(runners: dict[str, Runner], works: list[Workload], repeats: int = 1) -> list[Measurement]:
    first = works[0]
    warmup = Workload(min(WARMUP_STREAMS, first.streams), first.prompt_len,
                      min(WARMUP_NEW_TOKENS, first.new_tokens), seed=first.seed + 1)
    for run in runners.values():
        run(warmup)
    measurements = []
    for repeat in range(repeats):
        for work in works:
            for name, run in runners.items():
                m = run(work)
                m.repeat = repeat
                measurements.append(m)
                print(f"  [{repeat + 1}/{repeats}] {name:32s} {work.streams:4d} streams "
                      f"{m.tokens_per_second:10.1f} tok/s", file=sys.stderr)
    return measurements


def median_runs(measurements: list[Measurement]) -> list[Measurement]:
    """Per (system, streams), in first-seen order, the run of median tokens/s (the lower of the
    two middle runs for an even count), so that its other figures come from the same run."""
    groups: dict[tuple[str, int], list[Measurement]] = {}
    for m in measurements:
        groups.setdefault((m.system, m.streams), []).append(m)
    return [sorted(runs, key=lambda m: m.tokens_per_second)[(len(runs) - 1) // 2] for runs in groups.values()]


def ratios(measurements: list[Measurement]) -> list[float]:
    """Engine tokens/s over each measurement's tokens/s at the same stream count."""
    engine = {m.streams: m.tokens_per_second for m in measurements if m.system == ENGINE}
    return [engine[m.streams] / m.tokens_per_second for m in measurements]


def targets(measurements: list[Measurement]) -> list[dict]:
    """The issue's targets, each with its measured value (None when that run was not made)."""
    ratio_of = {(m.system, m.streams): r for m, r in zip(measurements, ratios(measurements))}
    overhead_of = {m.streams: m.details["overhead_fraction"] for m in measurements if m.system == ENGINE}
    checks = [
        (f"engine ÷ generate_batch at {TARGETS_AT_STREAMS} streams",
         ratio_of.get((GENERATE_BATCH, TARGETS_AT_STREAMS)), ">=", 10.0),
        (f"engine ÷ static generate at {TARGETS_AT_STREAMS} streams",
         ratio_of.get((STATIC_GENERATE, TARGETS_AT_STREAMS)), ">=", 1.0),
        (f"engine overhead at {OVERHEAD_AT_STREAMS} streams", overhead_of.get(OVERHEAD_AT_STREAMS), "<=", 0.15),
    ]
    return [
        {"target": name, "value": value, "bound": f"{op} {bound}",
         "met": None if value is None else (value >= bound if op == ">=" else value <= bound)}
        for name, value, op, bound in checks
    ]


def target_lines(checks: list[dict]) -> list[str]:
    return [
        f"- {c['target']} (target {c['bound']}): "
        + ("not measured" if c["value"] is None else f"{c['value']:.3g}, {'met' if c['met'] else 'missed'}")
        for c in checks
    ]


def markdown_table(measurements: list[Measurement]) -> str:
    rows = ["| system | streams | tokens | wall s | tokens/s | engine ÷ system | engine overhead "
            "| of which not codec |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for m, ratio in zip(measurements, ratios(measurements)):
        overheads = " | "
        if m.system == ENGINE:
            overheads = " | ".join(f"{100 * m.details[k]:.1f} %" for k in ("overhead_fraction", "engine_overhead_fraction"))
        rows.append(f"| {m.system} | {m.streams} | {m.tokens} | {m.seconds:.2f} | "
                    f"{m.tokens_per_second:,.0f} | {ratio:.2f}× | {overheads} |")
    return "\n".join(rows)


def machine_info() -> dict:
    def git(*args: str) -> str | None:
        done = subprocess.run(["git", *args], capture_output=True, text=True, cwd=Path(__file__).parent)
        return done.stdout.strip() if done.returncode == 0 else None

    import transformers

    return {
        "platform": platform.platform(), "processor": platform.processor() or platform.machine(),
        "cpus_usable": len(os.sched_getaffinity(0)), "load_average": os.getloadavg(),
        "python": platform.python_version(), "torch": torch.__version__, "transformers": transformers.__version__,
        "torch_threads": torch.get_num_threads(),
        "commit": git("rev-parse", "HEAD") or "no commit",
        "tree_dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", type=int, nargs="+", help="concurrent streams (default 16 64)")
    parser.add_argument("--prompt-len", type=int, help="prompt tokens per stream (default 40)")
    parser.add_argument("--new-tokens", type=int, help="generated tokens per stream (default 200)")
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    parser.add_argument("--seed", type=int, default=0, help="seed of the prompt token ids")
    parser.add_argument("--repeats", type=int, default=1, help="rounds to run; the table shows medians")
    parser.add_argument("--skip-transformers", action="store_true", help="measure the engine only")
    parser.add_argument("--quick", action="store_true", help="tiny shapes, for the smoke test")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results", help="results folder")
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.threads < 1:
        parser.error("--repeats and --threads must be >= 1")
    for name, value in PRESETS["quick" if args.quick else "full"].items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    return args


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    from model.tiny_random import ensure_tiny_random

    folder = str(ensure_tiny_random())
    started_at = datetime.now(timezone.utc)
    machine = machine_info()
    runners = {ENGINE: engine_runner(folder)}
    if not args.skip_transformers:
        runners |= transformers_runners(folder)
    works = [Workload(n, args.prompt_len, args.new_tokens, args.seed) for n in args.streams]
    runs = measure_all(runners, works, args.repeats)
    summary = median_runs(runs)
    table = markdown_table(summary)
    report = {
        "date": started_at.isoformat(timespec="seconds"),
        "command": "python -m benchmarks.throughput " + " ".join(sys.argv[1:] if argv is None else argv),
        "machine": machine | {"load_average_after": os.getloadavg()},
        "workload": {"prompt_len": args.prompt_len, "new_tokens": args.new_tokens, "seed": args.seed,
                     "greedy": True, "repeats": args.repeats,
                     "warmup_streams": WARMUP_STREAMS, "warmup_new_tokens": WARMUP_NEW_TOKENS},
        "runs": [asdict(m) | {"tokens_per_second": m.tokens_per_second} for m in runs],
        "summary": [{"system": m.system, "streams": m.streams, "repeat": m.repeat,
                     "tokens_per_second": m.tokens_per_second, "engine_ratio": r}
                    for m, r in zip(summary, ratios(summary))],
        "targets": targets(summary),
    }
    print(table, *target_lines(report["targets"]), sep="\n")
    write_results(report, table, args.out, started_at)
    return report


def write_results(report: dict, table: str, out: Path, started_at: datetime) -> None:
    out.mkdir(parents=True, exist_ok=True)
    stem = out / f"throughput-{started_at:%Y-%m-%d-%H%M}"
    stem.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")
    machine = report["machine"]
    stem.with_suffix(".md").write_text("\n".join([
        f"# Throughput, {report['date']}", "", f"`{report['command']}`", "",
        f"{machine['processor']}, {machine['cpus_usable']} usable CPUs, torch threads: {machine['torch_threads']}, "
        f"load average {machine['load_average'][0]:.1f} before / {machine['load_average_after'][0]:.1f} after; "
        f"torch {machine['torch']}, transformers {machine['transformers']}, commit {machine['commit']}"
        f"{' (tree dirty)' if machine['tree_dirty'] else ''}.", "",
        table, "", *target_lines(report["targets"]), "", SETTINGS, "",
    ]))


if __name__ == "__main__":
    main()
