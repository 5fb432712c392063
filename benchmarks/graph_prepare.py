"""The host side of a Qwen3-TTS decode-graph step: what `prepare` costs the samplers of the graph
emitter (code 0's GraphSampler and the code predictor's GraphSubStepSampler) at the released
checkpoints' sizes and sampling defaults, for a batch that changes every step and for one that
stays (a decode batch usually is the last one again).

    python -m benchmarks.graph_prepare --rows 16 64 [--seeded] [--device cuda]

Per row count: torch calls a prepare makes (counted at the dispatcher: on a GPU each is a launch
or a copy the step waits for, since the replay follows it) and microseconds a prepare, the
median of `--repeats`. On the CPU the time is mostly the noise itself (code 0's draws over 2,049
candidates per row), which a GPU draws in one kernel; the calls are what carries over. One JSON
line on stdout.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from model.families.qwen3_tts.config import MIN_FRAMES, SamplingDefaults
from model.families.qwen3_tts.release_shapes import GENERATION, RELEASE_SHAPES
from model.families.qwen3_tts.stream import sub_talker_params
from model.sampling import SamplingParams, SamplingState
from model.sampling.graph_sampler import GraphSampler
from model.sampling.graph_substeps import GraphSubStepSampler

SHAPE = RELEASE_SHAPES["random-qwen3-0.6b"]
CODE_0_WIDTH = SHAPE.codebook + 1  # the codes and end of speech: what the reference leaves code 0
NUM_CODES = 15  # codes 1..15 of a 16-codebook frame
DEFAULTS = SamplingDefaults.from_dict(GENERATION)


class _CallCounter(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.calls += 1
        return func(*args, **(kwargs or {}))


class GraphPrepare:
    """The graph emitter's two samplers for up to `max_rows` rows. Invariant: `prepare(batch)` is
    what a decode step's host side asks of them for that batch."""

    def __init__(self, max_rows: int, device: torch.device) -> None:
        eos = SHAPE.codebook  # any id of the candidates: the stop block's cost does not depend on which
        self.code_0 = GraphSampler(max_rows, SHAPE.talker_vocab, (eos,), CODE_0_WIDTH, device)
        self.substeps = GraphSubStepSampler(max_rows, NUM_CODES, SHAPE.codebook, DEFAULTS.subtalker_top_k, device)

    def prepare(self, batch: Sequence[tuple[SamplingState, SamplingState]], padded: int) -> None:
        emits = [True] * len(batch)
        self.code_0.prepare([code_0 for code_0, _ in batch], emits, padded)
        self.substeps.prepare([depth for _, depth in batch], emits, padded)


def stream_states(seed: int | None, device: torch.device) -> tuple[SamplingState, SamplingState]:
    """A request's two states under the released defaults: code 0's (as the frontend's
    default_sampling makes them) and its code predictor's (as a Qwen3 stream makes them)."""
    code_0 = SamplingParams(temperature=DEFAULTS.temperature, top_k=DEFAULTS.top_k, top_p=DEFAULTS.top_p,
                            repetition_penalty=DEFAULTS.repetition_penalty, seed=seed,
                            max_tokens=DEFAULTS.max_new_tokens, min_tokens=MIN_FRAMES)
    depth = sub_talker_params(code_0, DEFAULTS)
    return SamplingState(code_0, device=device), SamplingState(depth, device=device)


def measure(rows: int, seeded: bool, repeats: int, device: torch.device) -> dict:
    graph = GraphPrepare(rows + 1, device)
    batches = [[stream_states(100 * b + i if seeded else None, device) for i in range(rows)] for b in range(2)]
    figures = {}
    # "kept": the same batch every step; "changed": two batches in turn, so every call is a new one.
    for label, pick in (("kept", lambda step: batches[0]), ("changed", lambda step: batches[step % 2])):
        graph.prepare(batches[1], rows)  # the other batch before the first call
        counts = []
        for step in range(repeats):
            with _CallCounter() as counter:
                graph.prepare(pick(step), rows)
            counts.append(counter.calls)
        graph.prepare(batches[1], rows)
        times = []
        for step in range(repeats):
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            started = time.perf_counter()
            graph.prepare(pick(step), rows)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            times.append(time.perf_counter() - started)
        figures[f"calls_{label}"] = statistics.median(counts)
        figures[f"us_{label}"] = 1e6 * statistics.median(times)
    return figures


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--seeded", action="store_true", help="every request seeded (two generator calls a row)")
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    torch.set_num_threads(1)
    results = {str(rows): measure(rows, args.seeded, args.repeats, device) for rows in args.rows}
    json.dump({"rows": results, "seeded": args.seeded, "device": str(device), "torch": torch.__version__,
               "command": "python -m benchmarks.graph_prepare " + " ".join(sys.argv[1:] if argv is None else argv)},
              sys.stdout)
    print()


if __name__ == "__main__":
    main()
