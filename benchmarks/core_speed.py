"""The engine core's own speed, in process: one stream's real-time factor and time to first audio,
and N concurrent streams' audio seconds per wall second, with where their steps' time went. No
HTTP, no client: what a change to the step costs or saves. To compare two trees, run it in each,
alternating, on a quiet machine:

    for i in 1 2 3; do for t in old new; do
        PYTHONPATH=$t python -m benchmarks.core_speed --label $t >> runs.jsonl; done; done
    python -m benchmarks.core_speed --summarize runs.jsonl

The core runs in this process, with the allocator this process started with (each run records
it): a served CPU core runs under tcmalloc where the system has it (engine/allocator.py), so
`LD_PRELOAD=libtcmalloc_minimal.so.4 python -m benchmarks.core_speed ...` measures what it runs.

The step split, per stream count, over the timed rounds (percent of step time): `forward` the
backbone and its output head (EngineStats.forward_seconds), `emit` the family's emit
(emit_seconds: sampling, and a depth stage such as Qwen3-TTS's code predictor), `codec` the audio
stage (codec_seconds), `rest` the remainder: `inputs` (the family's embed, timed here) and `other`
(scheduling, attention metadata, admission, bookkeeping). Where the family has a code predictor,
`emit` splits further into its forwards (`predictor_forward`: CodePredictor._forward, the decoder
layers and each code's head, as `forward` holds the talker's head), `predictor_inputs` (each
sub-step's input: the code just drawn, looked up in its table: CodePredictor._lookup),
`sampling` (code 0's Sampler call, the predictor's SubStepSampler start and draws) and
`emit_other` (the end-of-speech mask, code 0's embedding, the hand-back), and the probe counts
its calls: `predictor_calls_per_step_min/max/mean` (forward calls per emitting step) and
`predictor_rows_per_call` (streams per call). `not_forward_or_codec` is everything but the
forward calls (talker and predictor) and the codec; `not_model_or_codec` also leaves out the
models' input embeddings (`inputs` and `predictor_inputs`), model compute that Chorus runs
outside its forward calls (qwen-tts's talker forward sums the frame's code embeddings and its
code predictor's forward embeds each code; the text projection runs before its decode loop):
what is left is sampling and the engine's own work.
`beyond_talker_and_codec` counts the predictor's forwards in too. In a tree from before
EngineStats.emit_seconds, `emit` is the probe's own timer of the family's emit. The probe wraps
the family's methods on its instance only; its timers cost about a microsecond a call (a second
probe over the first moved `not_forward_or_codec` by less than its run-to-run scatter).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable

SENTENCES = (
    "The quick brown fox jumps over the lazy dog.",
    "Streams of speech arrive while others are still playing.",
    "Is this the last question of the day?",
    "Numbers like twelve and forty two are read as words.",
)


def _core(model: str, threads: int, admission: bool, codec: str | None = None, cpu_batch_precision: str = "auto"):
    import torch

    from engine.config import EngineConfig
    from engine.core import EngineCore
    from model.config import ModelConfig

    torch.set_num_threads(threads)
    # NOTE: named only when asked for, so that "auto" still runs a tree from before the field.
    extra = {} if cpu_batch_precision == "auto" else {"cpu_batch_precision": cpu_batch_precision}
    config = EngineConfig(model=ModelConfig(model=model, device="cpu", codec=codec, **extra), mode="inproc")
    # NOTE: the concurrent runs measure raw work: every stream admitted, whatever its listener.
    delay = 1.0 if admission else None
    if hasattr(config, "capacity"):
        config.capacity.max_queue_delay = delay
    else:  # a tree from before capacity/ (the setting sat on the scheduler's config)
        config.scheduler.max_queue_delay = delay
    return EngineCore(config)


class _Timed:
    """Replaces the attribute `name` of the instance `owner` (a method or a callable object) with a
    wrapper that counts its calls and sums their seconds; `rows(*args)` (optional) sums a row count."""

    def __init__(self, owner: Any, name: str, rows: Callable[..., int] | None = None) -> None:
        self.calls, self.seconds, self.rows = 0, 0.0, 0
        original = getattr(owner, name)

        def timed(*args, **kwargs):
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - started
                self.calls += 1
                if rows is not None:
                    self.rows += rows(*args, **kwargs)

        setattr(owner, name, timed)

    def snapshot(self) -> tuple[int, float, int]:
        return self.calls, self.seconds, self.rows


class StepProbe:
    """Timers and counters on one family instance (see the module's docstring); absent parts of a
    family (no embed, no predictor) are left out."""

    def __init__(self, family: Any) -> None:
        self.timers: dict[str, _Timed] = {}
        if hasattr(family, "embed"):
            self.timers["inputs"] = _Timed(family, "embed")
        self.timers["emit"] = _Timed(family, "emit", rows=lambda head_out, streams: len(streams))
        samplers = [family] if callable(getattr(family, "sampler", None)) else []
        predictor = getattr(family, "predictor", None)
        self.calls_per_step: Counter[int] = Counter()  # predictor forward calls per predict call
        if predictor is not None and hasattr(predictor, "_forward") and hasattr(predictor, "predict"):
            forward = self.timers["predictor_forward"] = _Timed(predictor, "_forward")
            if hasattr(predictor, "_lookup"):  # a tree from before the lookup was a call of its own has none
                self.timers["predictor_inputs"] = _Timed(predictor, "_lookup")
            predict = predictor.predict

            def counted_predict(hidden, *args, **kwargs):
                before = forward.calls
                try:
                    return predict(hidden, *args, **kwargs)
                finally:
                    calls = forward.calls - before
                    self.calls_per_step[calls] += 1
                    self.predictor_row_calls += calls * hidden.shape[0]

            predictor.predict = counted_predict
            self.predictor_row_calls = 0  # sum over calls of the streams (rows) in each
            sampler = getattr(predictor, "sampler", None)
            if hasattr(sampler, "draw"):  # a SubStepSampler: a frame's start, then each sub-step's draw
                self.timers["sampling_start"] = _Timed(sampler, "start")
                self.timers["sampling_draw"] = _Timed(sampler, "draw")
            elif callable(sampler):
                samplers.append(predictor)
        for index, owner in enumerate(samplers):
            self.timers[f"sampling_{index}"] = _Timed(owner, "sampler")

    def snapshot(self) -> dict[str, Any]:
        return {"timers": {name: t.snapshot() for name, t in self.timers.items()},
                "calls_per_step": Counter(self.calls_per_step),
                "predictor_row_calls": getattr(self, "predictor_row_calls", 0)}


def step_split(stats_before: dict[str, float], stats_after: dict[str, float], probe_before: dict[str, Any],
               probe_after: dict[str, Any], streams: int) -> dict[str, float]:
    """The figures of the step split (module docstring) between two snapshots."""
    def delta(name: str) -> float:
        return stats_after.get(name, 0.0) - stats_before.get(name, 0.0)

    def timer(name: str) -> tuple[int, float, int]:
        after = probe_after["timers"].get(name)
        if after is None:
            return 0, 0.0, 0
        before = probe_before["timers"][name]
        return after[0] - before[0], after[1] - before[1], after[2] - before[2]

    steps, step = delta("steps"), delta("step_seconds")
    if not steps or step <= 0:
        return {}
    emit = delta("emit_seconds") if "emit_seconds" in stats_after else timer("emit")[1]  # a tree before the stat
    forward, codec = delta("forward_seconds"), delta("codec_seconds")
    inputs = timer("inputs")[1]
    rest = step - forward - emit - codec
    pct = {"forward": forward, "emit": emit, "codec": codec, "rest": rest, "inputs": inputs, "other": rest - inputs}
    figures = {f"step_ms_{streams}": 1000 * step / steps, f"steps_{streams}": steps}
    emits, _, emit_rows = timer("emit")
    figures[f"rows_per_step_{streams}"] = emit_rows / emits if emits else 0.0
    samplers = [name for name in probe_after["timers"] if name.startswith("sampling_")]
    sampling = sum(timer(name)[1] for name in samplers)
    if samplers:
        pct["sampling"] = sampling
        if len(samplers) > 1:  # which draw costs what: code 0's Sampler, a frame's start, its draws
            pct |= {name: timer(name)[1] for name in samplers}
    if "predictor_forward" in probe_after["timers"]:
        calls, predictor_forward, _ = timer("predictor_forward")
        predictor_inputs = timer("predictor_inputs")[1]
        pct |= {"predictor_forward": predictor_forward, "predictor_inputs": predictor_inputs,
                "emit_other": emit - predictor_forward - predictor_inputs - sampling,
                "not_forward_or_codec": rest + emit - predictor_forward}
        # The forwards as the reference's forward() computes them: their input embeddings too.
        pct["not_model_or_codec"] = pct["not_forward_or_codec"] - inputs - predictor_inputs
        per_step = probe_after["calls_per_step"] - probe_before["calls_per_step"]
        row_calls = probe_after["predictor_row_calls"] - probe_before["predictor_row_calls"]
        predicts = sum(per_step.values())
        figures |= {
            f"predictor_calls_per_step_min_{streams}": min(per_step, default=0),
            f"predictor_calls_per_step_max_{streams}": max(per_step, default=0),
            f"predictor_calls_per_step_mean_{streams}": calls / predicts if predicts else 0.0,
            f"predictor_rows_per_call_{streams}": row_calls / calls if calls else 0.0,
            f"emitting_steps_{streams}": predicts,
        }
    else:
        pct["not_forward_or_codec"] = rest + emit
    pct["beyond_talker_and_codec"] = rest + emit
    figures |= {f"{name}_pct_{streams}": 100 * seconds / step for name, seconds in pct.items()}
    return figures


_STATS = ("steps", "step_seconds", "forward_seconds", "emit_seconds", "codec_seconds")


def _stats(core) -> dict[str, float]:
    return {name: getattr(core.stats, name) for name in _STATS if hasattr(core.stats, name)}


def _run(core, frontend, streams: int, round_index: int, max_tokens: int | None = None,
         fixed_length: bool = False) -> tuple[float, list]:
    """Adds `streams` requests at once and steps until all are done: (wall seconds, metrics).
    `max_tokens` caps each request's outputs (a random model's run to its default cap is long);
    with `fixed_length` every request makes exactly that many (min_tokens = max_tokens), so all
    `streams` stay in every decode step."""
    voice = frontend.voices[0]
    params = frontend.default_sampling()
    if max_tokens is not None:
        params = params.replace(max_tokens=max_tokens,
                                min_tokens=max_tokens if fixed_length else min(params.min_tokens, max_tokens))
    for i in range(streams):
        text = SENTENCES[(i + round_index) % len(SENTENCES)]
        core.add_request(f"r{round_index}-{i}", frontend.prepare(text, voice), params.replace(seed=i))
    started = time.perf_counter()
    metrics = []
    while core.has_work:
        metrics += [c.metrics for c in core.step() if c.finished]
    return time.perf_counter() - started, metrics


def measure(model: str, threads: int, stream_counts: list[int], rounds: int, max_tokens: int | None = None,
            fixed_length: bool = False, codec: str | None = None, cpu_batch_precision: str = "auto") -> dict:
    from model.config import ModelConfig
    from model.loader import load_frontend

    frontend = load_frontend(ModelConfig(model=model))
    figures: dict[str, float] = {}
    single = _core(model, threads, admission=True, codec=codec, cpu_batch_precision=cpu_batch_precision)
    _run(single, frontend, 1, -1, max_tokens, fixed_length)  # warm-up
    ones = [_run(single, frontend, 1, r, max_tokens, fixed_length)[1][0] for r in range(rounds)]
    figures["single_rtf"] = statistics.median(m.real_time_factor for m in ones)
    figures["single_ttfa_s"] = statistics.median(m.time_to_first_audio for m in ones)
    for streams in stream_counts:
        core = _core(model, threads, admission=False, codec=codec, cpu_batch_precision=cpu_batch_precision)
        probe = StepProbe(core.family)
        _run(core, frontend, 2, -1, max_tokens, fixed_length)  # warm-up
        rates = []
        stats_before, probe_before = _stats(core), probe.snapshot()
        for r in range(rounds):
            wall, metrics = _run(core, frontend, streams, r, max_tokens, fixed_length)
            rates.append(sum(m.audio_seconds for m in metrics) / wall)
        figures[f"audio_s_per_s_{streams}"] = statistics.median(rates)
        figures |= step_split(stats_before, _stats(core), probe_before, probe.snapshot(), streams)
    return figures


def summarize(path: Path) -> str:
    runs = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    labels = list(dict.fromkeys(r["label"] for r in runs))  # in order of appearance: the first is the base
    keys = list(dict.fromkeys(k for r in runs for k in r["figures"]))
    lines = ["| figure | " + " | ".join(f"{label} (median of {sum(r['label'] == label for r in runs)})"
                                         for label in labels) + (f" | {labels[1]} / {labels[0]} |" if len(labels) == 2 else " |"),
             "|---" * (len(labels) + 1 + (len(labels) == 2)) + "|"]
    for key in keys:
        values = [statistics.median(found) if (found := [r["figures"][key] for r in runs
                                                         if r["label"] == label and key in r["figures"]]) else None
                  for label in labels]
        row = f"| {key} | " + " | ".join("–" if v is None else f"{v:.3f}" for v in values)
        if len(labels) == 2:
            row += f" | {values[1] / values[0]:.3f}" if None not in values and values[0] else " | –"
        lines.append(row + " |")
    return "\n".join(lines)


def machine_info() -> dict:
    import torch

    def git(*args: str) -> str | None:
        done = subprocess.run(["git", *args], capture_output=True, text=True, cwd=Path(__file__).parent)
        return done.stdout.strip() if done.returncode == 0 else None

    from engine.allocator import allocator_in_use

    return {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
            "allocator": allocator_in_use(),
            "cpus_usable": len(os.sched_getaffinity(0)), "load_average": os.getloadavg(),
            "python": platform.python_version(), "torch": torch.__version__,
            "commit": git("rev-parse", "--short", "HEAD"),
            "tree_dirty": bool(git("status", "--porcelain", "--untracked-files=no"))}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="joe")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (the core's share of 2 cores)")
    parser.add_argument("--streams", type=int, nargs="+", default=[8, 16])
    parser.add_argument("--rounds", type=int, default=3, help="rounds per figure; each figure is their median")
    parser.add_argument("--max-tokens", type=int, help="cap on each request's outputs (default: the model's)")
    parser.add_argument("--fixed-length", action="store_true",
                        help="every request makes exactly --max-tokens outputs (min_tokens = max_tokens)")
    parser.add_argument("--codec", help="the model's codec (e.g. istft-int8 for joe; default: the model's)")
    parser.add_argument("--cpu-batch-precision", default="auto", choices=("auto", "bfloat16", "float32"),
                        help="products of several rows on the CPU (model/config.py; default: the tree's own)")
    parser.add_argument("--label", default="this tree")
    parser.add_argument("--summarize", type=Path, help="print the table of a file of runs (JSON lines)")
    args = parser.parse_args(argv)
    if args.fixed_length and args.max_tokens is None:
        parser.error("--fixed-length needs --max-tokens")
    if args.summarize:
        print(summarize(args.summarize))
        return
    machine = machine_info()
    figures = measure(args.model, args.threads, args.streams, args.rounds, args.max_tokens, args.fixed_length,
                      args.codec, args.cpu_batch_precision)
    machine["load_average_after"] = os.getloadavg()
    json.dump({"label": args.label, "model": args.model, "threads": args.threads, "figures": figures,
               "command": "python -m benchmarks.core_speed " + " ".join(sys.argv[1:] if argv is None else argv),
               "machine": machine}, sys.stdout)
    print()


if __name__ == "__main__":
    main()
