"""Hashes every request's audio through `EngineCore` on a scripted clock: a restructuring of the
engine must leave these hashes byte-identical.

The run is production-shaped (admission on, adaptive chunking, segments that follow one another,
a paused and an aborted request) but deterministic: time is a fake clock that moves only when the
model runs, by a fixed cost per row and prompt token, so every decision that reads the clock
(admission, the deadline order, prefill sizing, chunk sizes) is the same in every run and in
every tree that makes the same decisions. Run it in two trees and compare the digests:

    PYTHONPATH=<tree> python -m benchmarks.seeded_outputs --model joe --out a.json
"""
from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# A step costs this much fake time, in units of the audio one step makes: fixed, per decode row
# and per prompt token (about 12 streams in real time: admission and the deadlines see a load).
STEP_COST, ROW_COST, TOKEN_COST = 0.25, 0.06, 0.004
# Between steps with nothing to do, the driver lets this much fake time pass.
IDLE_SECONDS = 0.01


class ScriptedClock:
    """Monotonic fake seconds; moves only when told. Invariant: never goes back."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += max(0.0, seconds)


@dataclass(frozen=True)
class Arrival:
    """One request of the script: added before step `at`; `follows` names the segment before it
    (the same speech), which makes it a continuation."""

    at: int
    request_id: str
    text: str
    seed: int
    follows: str | None = None
    outputs_after: int = 0


TEXTS = (
    "The quick brown fox jumps over the lazy dog.",
    "A short one.",
    "Streams of speech arrive while others are still playing, and each must keep its listener fed.",
    "Numbers like twelve and forty two are read as words.",
    "Is this the last question of the day?",
    "Segments of one speech follow each other without a gap.",
)


def script() -> tuple[list[Arrival], dict[int, list[tuple[str, str]]]]:
    """The arrivals, and the commands by step: ("pause" | "resume" | "abort", request id)."""
    arrivals = [Arrival(at=3 * i, request_id=f"r{i}", text=TEXTS[i % len(TEXTS)], seed=100 + i) for i in range(10)]
    # A speech of three segments, each added as the one before it is generating.
    arrivals += [
        Arrival(5, "s0", TEXTS[2], 7, outputs_after=400),
        Arrival(25, "s1", TEXTS[5], 8, follows="s0", outputs_after=200),
        Arrival(45, "s2", TEXTS[1], 9, follows="s1"),
    ]
    # A burst: more than the engine has room for on this clock (some queue, some are refused).
    arrivals += [Arrival(60, f"b{i}", TEXTS[i % len(TEXTS)], 200 + i) for i in range(12)]
    commands = {12: [("pause", "r2")], 40: [("resume", "r2")], 30: [("abort", "r4")]}
    return arrivals, commands


def run(model: str, device: str = "cpu") -> dict:
    import torch

    from engine.config import EngineConfig
    from engine.core import EngineCore
    from engine.errors import RequestRejected
    from memory.config import CacheConfig
    from model.config import ModelConfig
    from model.loader import load_frontend
    from model.tiny_random import ensure_tiny_random

    torch.manual_seed(0)
    clock = ScriptedClock()
    time.monotonic = clock  # an old tree reads the clock itself; a new one is also given it
    time.perf_counter = clock
    path = str(ensure_tiny_random()) if model == "tiny-random" else model
    config = EngineConfig(model=ModelConfig(model=path, device=device),
                          cache=CacheConfig(block_size=16, num_blocks=512), mode="inproc")
    config.scheduler.max_num_seqs = 16
    kwargs = {"clock": clock} if "clock" in inspect.signature(EngineCore).parameters else {}
    core = EngineCore(config, **kwargs)
    execute = core.runner.execute
    step_audio = 1.0 / core.limits.outputs_per_second

    def timed_execute(chunks, streams):
        result = execute(chunks, streams)
        rows = sum(1 for c in chunks if c.num_new_tokens == 1)
        tokens = sum(c.num_new_tokens for c in chunks) - rows
        clock.advance(step_audio * (STEP_COST + ROW_COST * rows + TOKEN_COST * tokens))
        return result

    core.runner.execute = timed_execute
    frontend = load_frontend(ModelConfig(model=path))
    voice = frontend.default_voice if hasattr(frontend, "default_voice") else frontend.voices[0]
    arrivals, commands = script()
    outcome: dict[str, dict] = {}
    audio: dict[str, list[np.ndarray]] = {}
    step = 0
    while step < 20_000:
        for arrival in (a for a in arrivals if a.at == step):
            prompt = frontend.prepare(arrival.text, voice)
            params = frontend.default_sampling().replace(seed=arrival.seed, max_tokens=600)
            try:
                core.add_request(arrival.request_id, prompt, params, continuation=arrival.follows is not None,
                                 outputs_after=arrival.outputs_after, follows=arrival.follows)
            except RequestRejected as exc:
                outcome[arrival.request_id] = {"refused": exc.code}
        for command, request_id in commands.get(step, []):
            if command == "abort":
                core.abort_request(request_id)
            else:
                core.set_paused(request_id, command == "pause")
        if core.has_work:
            for chunk in core.step():
                audio.setdefault(chunk.request_id, []).append(chunk.pcm)
                if chunk.finished:
                    m = chunk.metrics
                    outcome[chunk.request_id] = {
                        "reason": chunk.finish_reason, "chunks": [len(p) for p in audio[chunk.request_id]],
                        "tokens": m.output_tokens, "ttfa": None if m.time_to_first_audio is None
                        else round(m.time_to_first_audio, 9),
                        "sha256": hashlib.sha256(np.concatenate(audio[chunk.request_id]).tobytes()).hexdigest(),
                    }
            for request_id, exc in core.take_refusals():
                outcome[request_id] = {"refused": exc.code}
        else:
            clock.advance(IDLE_SECONDS)
        step += 1
        if step > max(a.at for a in arrivals) and not core.has_work:
            break
    digest = hashlib.sha256(json.dumps(outcome, sort_keys=True).encode()).hexdigest()
    return {"model": model, "steps": step, "digest": digest, "requests": outcome}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny-random", help="tiny-random, joe, or a model folder")
    parser.add_argument("--out", type=Path, help="write the full result here (JSON)")
    args = parser.parse_args(argv)
    result = run(args.model)
    if args.out:
        args.out.write_text(json.dumps(result, indent=1, sort_keys=True))
    refused = sum(1 for r in result["requests"].values() if "refused" in r)
    print(f"{args.model}: {len(result['requests'])} requests ({refused} refused), "
          f"{result['steps']} steps, digest {result['digest']}", file=sys.stdout)


if __name__ == "__main__":
    main()
