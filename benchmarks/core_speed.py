"""The engine core's own speed, in process: one stream's real-time factor and time to first audio,
and N concurrent streams' audio seconds per wall second. No HTTP, no client: what a change to
the step costs or saves. To compare two trees, run it in each, alternating, on a quiet machine:

    for i in 1 2 3; do for t in old new; do
        PYTHONPATH=$t python -m benchmarks.core_speed --label $t >> runs.jsonl; done; done
    python -m benchmarks.core_speed --summarize runs.jsonl
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

SENTENCES = (
    "The quick brown fox jumps over the lazy dog.",
    "Streams of speech arrive while others are still playing.",
    "Is this the last question of the day?",
    "Numbers like twelve and forty two are read as words.",
)


def _core(model: str, threads: int, admission: bool):
    import torch

    from engine.config import EngineConfig
    from engine.core import EngineCore
    from model.config import ModelConfig

    torch.set_num_threads(threads)
    config = EngineConfig(model=ModelConfig(model=model, device="cpu"), mode="inproc")
    # NOTE: the concurrent runs measure raw work: every stream admitted, whatever its listener.
    delay = 1.0 if admission else None
    if hasattr(config, "capacity"):
        config.capacity.max_queue_delay = delay
    else:  # a tree from before capacity/ (the setting sat on the scheduler's config)
        config.scheduler.max_queue_delay = delay
    return EngineCore(config)


def _run(core, frontend, streams: int, round_index: int) -> tuple[float, list]:
    """Adds `streams` requests at once and steps until all are done: (wall seconds, metrics)."""
    voice = frontend.voices[0]
    params = frontend.default_sampling()
    for i in range(streams):
        text = SENTENCES[(i + round_index) % len(SENTENCES)]
        core.add_request(f"r{round_index}-{i}", frontend.prepare(text, voice), params.replace(seed=i))
    started = time.perf_counter()
    metrics = []
    while core.has_work:
        metrics += [c.metrics for c in core.step() if c.finished]
    return time.perf_counter() - started, metrics


def measure(model: str, threads: int, stream_counts: list[int], rounds: int) -> dict:
    from model.config import ModelConfig
    from model.loader import load_frontend

    frontend = load_frontend(ModelConfig(model=model))
    figures: dict[str, float] = {}
    single = _core(model, threads, admission=True)
    _run(single, frontend, 1, -1)  # warm-up
    ones = [_run(single, frontend, 1, r)[1][0] for r in range(rounds)]
    figures["single_rtf"] = statistics.median(m.real_time_factor for m in ones)
    figures["single_ttfa_s"] = statistics.median(m.time_to_first_audio for m in ones)
    for streams in stream_counts:
        core = _core(model, threads, admission=False)
        _run(core, frontend, 2, -1)  # warm-up
        rates = []
        for r in range(rounds):
            wall, metrics = _run(core, frontend, streams, r)
            rates.append(sum(m.audio_seconds for m in metrics) / wall)
        figures[f"audio_s_per_s_{streams}"] = statistics.median(rates)
    return figures


def summarize(path: Path) -> str:
    runs = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    labels = list(dict.fromkeys(r["label"] for r in runs))  # in order of appearance: the first is the base
    keys = [k for k in runs[0]["figures"]]
    lines = ["| figure | " + " | ".join(f"{label} (median of {sum(r['label'] == label for r in runs)})"
                                         for label in labels) + (f" | {labels[1]} / {labels[0]} |" if len(labels) == 2 else " |"),
             "|---" * (len(labels) + 1 + (len(labels) == 2)) + "|"]
    for key in keys:
        values = [statistics.median(r["figures"][key] for r in runs if r["label"] == label) for label in labels]
        row = f"| {key} | " + " | ".join(f"{v:.3f}" for v in values)
        if len(labels) == 2:
            row += f" | {values[1] / values[0]:.3f}"
        lines.append(row + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="joe")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (the core's share of 2 cores)")
    parser.add_argument("--streams", type=int, nargs="+", default=[8, 16])
    parser.add_argument("--rounds", type=int, default=3, help="rounds per figure; each figure is their median")
    parser.add_argument("--label", default="this tree")
    parser.add_argument("--summarize", type=Path, help="print the table of a file of runs (JSON lines)")
    args = parser.parse_args(argv)
    if args.summarize:
        print(summarize(args.summarize))
        return
    figures = measure(args.model, args.threads, args.streams, args.rounds)
    json.dump({"label": args.label, "model": args.model, "threads": args.threads, "figures": figures}, sys.stdout)
    print()


if __name__ == "__main__":
    main()
