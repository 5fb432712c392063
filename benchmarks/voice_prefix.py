"""What a stored voice's prompt costs each request: prefill tokens and time to first audio of
requests in one in-context voice (a clip of `--clip-seconds`), in process on the engine core.

    python -m benchmarks.voice_prefix --model tiny-random-qwen3-base --clip-seconds 10

Each round, on a fresh engine, requests run one at a time, in order: `first` (a text in the voice), `second` (another text in
the same voice: what the prefix cache can share is the voice's part of the prompt), `repeat` (the
first text again: the whole prompt is cached but its last block), `x_vector` (a clip of the
same voice without its transcript), and `silent` (a third text, as long as the second, in the voice
but without its codec prefix: its codec starts from silence, as every stream's did before they
started from the clip's state; against `second` it is what priming costs a request). Prefill
tokens are the engine's `prompt_tokens_computed` (positions it ran, cached ones excluded); the
prompt's length is its positions; `primers_made` counts the clips the engine decoded to prime a
codec (engine/audio/primers.py: the first request in a voice pays it, the others copy its state).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import statistics

import numpy as np

TEXTS = ("The quick brown fox jumps over the lazy dog.", "Streams of speech arrive while others are still playing.",
         "Streams of sound arrive while others are still speaking.")
TRANSCRIPT = "This is the voice that the model continues."


def synthetic_voice(seconds: float, rate: int = 24000) -> np.ndarray:
    """A voiced signal (harmonics under a syllable-rate envelope): what the encoders take."""
    t = np.arange(int(seconds * rate)) / rate
    pitch = 140 + 20 * np.sin(2 * np.pi * 0.7 * t)
    phase = 2 * np.pi * np.cumsum(pitch) / rate
    voiced = sum(np.sin(k * phase) / k for k in range(1, 8))
    envelope = 0.5 + 0.5 * np.sin(2 * np.pi * 4 * t) ** 2
    return (0.2 * voiced * envelope).astype(np.float32)


def measure(model: str, clip_seconds: float, rounds: int) -> dict:
    from benchmarks.core_speed import _core
    from model.config import ModelConfig
    from model.loader import load_frontend

    frontend = load_frontend(ModelConfig(model=model))
    cloner = frontend.voice_cloner()
    clip = synthetic_voice(clip_seconds, cloner.sample_rate)
    in_context, x_vector = cloner.clone(clip, TRANSCRIPT), cloner.clone(clip)
    params = frontend.default_sampling().replace(max_tokens=8, seed=0)
    runs = {"first": (TEXTS[0], in_context), "second": (TEXTS[1], in_context), "repeat": (TEXTS[0], in_context),
            "x_vector": (TEXTS[0], x_vector), "silent": (TEXTS[2], in_context)}
    figures: dict[str, list[float]] = {}
    for round_index in range(rounds):
        core = _core(model, 1, admission=False)  # an empty prefix cache each round, and no primer kept
        for name, (text, clone) in runs.items():
            prompt = frontend.prepare(text, f"voice-{round_index}", clone=clone)
            if name == "silent":
                prompt = dataclasses.replace(prompt, codec_prefix=None)
            before = core.stats.prompt_tokens_computed
            core.add_request(f"{name}-{round_index}", prompt, params)
            metrics = None
            while core.has_work:
                metrics = next((c.metrics for c in core.step() if c.finished), metrics)
            figures.setdefault(f"{name}_prompt_positions", []).append(len(prompt.token_ids))
            figures.setdefault(f"{name}_prefill_tokens", []).append(core.stats.prompt_tokens_computed - before)
            figures.setdefault(f"{name}_ttfa_s", []).append(metrics.time_to_first_audio)
            figures.setdefault(f"{name}_primers_made", []).append(core.audio.primers.made)
    return {name: statistics.median(values) for name, values in figures.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="tiny-random-qwen3-base")
    parser.add_argument("--clip-seconds", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(json.dumps(measure(args.model, args.clip_seconds, args.rounds), indent=1))


if __name__ == "__main__":
    main()
