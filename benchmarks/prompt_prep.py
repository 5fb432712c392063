"""Prompt preparation of the 30 evaluation sentences on a model's front end, this tree against
another commit's, side by side: what "plain text costs nothing more" is measured by (issue 31:
normalization, SSML and pronunciations must leave plain text's preparation within 10 %).

    python -m benchmarks.prompt_prep --against e3ce446^        # joe, 7 alternating runs each
    python -m benchmarks.prompt_prep --model joe --rounds 20   # this tree alone

Each run is a fresh process (`--tree DIR` runs the same measurement on DIR's code): it prepares
every sentence once to warm up, then `--rounds` times over, and reports the median round. The
runs alternate between the trees, so load on the machine falls on both alike; the result is the
ratio of the two medians of runs, with each tree's spread.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def measure(tree: Path, model: str, rounds: int) -> float:
    """The median seconds one round of the 30 sentences takes on `tree`'s code, in this process."""
    sys.path.insert(0, str(tree))
    from evaluation import eval_sentences
    from model.config import ModelConfig
    from model.loader import load_frontend

    frontend = load_frontend(ModelConfig(model=model))
    sentences = eval_sentences()
    voice = frontend.voices[0]
    for sentence in sentences:  # warm: espeak's voice, the teacher's session, the allocator
        frontend.prepare(sentence, voice)
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        for sentence in sentences:
            frontend.prepare(sentence, voice)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def run_in(tree: Path, model: str, rounds: int) -> float:
    """`measure` in a fresh process on `tree`'s code."""
    command = [sys.executable, str(Path(__file__).resolve()), "--tree", str(tree), "--model", model,
               "--rounds", str(rounds), "--json"]
    out = subprocess.run(command, check=True, capture_output=True, text=True, cwd=tree).stdout
    return json.loads(out.splitlines()[-1])["round_seconds"]


def compare(against: str, model: str, rounds: int, runs: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="chorus-prompt-prep-") as scratch:
        other = Path(scratch) / "tree"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(other), against], check=True)
        try:
            here, there = [], []
            for _ in range(runs):
                here.append(run_in(ROOT, model, rounds))
                there.append(run_in(other, model, rounds))
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(other)], check=True)
    return {"model": model, "against": against, "rounds": rounds, "runs": runs,
            "this_tree_s": here, "against_s": there,
            "ratio": statistics.median(here) / statistics.median(there)}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="joe")
    parser.add_argument("--rounds", type=int, default=10, help="rounds of the 30 sentences per run")
    parser.add_argument("--runs", type=int, default=7, help="with --against: runs of each tree, alternating")
    parser.add_argument("--against", default=None, help="a commit to compare this tree with")
    parser.add_argument("--tree", type=Path, default=ROOT, help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.against is None:
        result = {"model": args.model, "rounds": args.rounds,
                  "round_seconds": measure(args.tree, args.model, args.rounds)}
        print(json.dumps(result) if args.json else
              f"{args.model}: {1000 * result['round_seconds']:.1f} ms for the 30 sentences (median of {args.rounds})")
        return result
    result = compare(args.against, args.model, args.rounds, args.runs)
    print(f"{args.model}: this tree {1000 * statistics.median(result['this_tree_s']):.1f} ms, {args.against} "
          f"{1000 * statistics.median(result['against_s']):.1f} ms per round of the 30 sentences "
          f"(median of {args.runs} runs each, alternating): ratio {result['ratio']:.3f}")
    return result


if __name__ == "__main__":
    main()
