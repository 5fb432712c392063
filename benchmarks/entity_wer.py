"""How well the built-in voice says entities ("$3.50", "03/14/2025", "Dr."), heard by an ASR:

    python -m benchmarks.entity_wer            # --limit N, --no-raw, --threads 2

For each (written, spoken) pair of evaluation/entities.tsv, `joe` through the engine (in
process, one request at a time, as benchmarks/intelligibility.py runs it) speaks
  - the entity input: the written sentence, normalized by the voice as it serves (model/text),
  - the written-out input: the spoken form, the same sentence in words,
  - the entity input, raw: the written sentence with normalization off (the front end's
    `normalizes`), what the voice said before normalization;
pocketsphinx (benchmarks/asr.py) transcribes each, and each transcript is scored against the
spoken form's words. Issue 31's target: WER of the entity input ≤ WER of the written-out input
+ 5 points. Results go to benchmarks/results/entity-wer-<date>.{json,md}, with every sentence's
normalized text and transcripts (what to look at when a reading is wrong).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import torch

from benchmarks.asr import Transcriber, WordErrors
from benchmarks.intelligibility import RESULTS, Synthesis, engine_sequential, git_commit
from capacity.config import CapacityConfig
from engine.client import EngineClient
from engine.config import EngineConfig
from evaluation import ENTITY_SENTENCES, entity_sentences
from model.config import ModelConfig
from model.text import normalize

TARGET_POINTS = 5.0
# The inputs measured: what each one feeds the voice, from a (written, spoken) pair.
ENTITY, WRITTEN_OUT, RAW = "entity input (normalized)", "written-out input", "entity input, raw"


@dataclass(slots=True)
class InputResult:
    """One input's transcripts of the whole set, each scored against its spoken form.
    Invariant: `heard` and `per_sentence` follow the set's order."""

    name: str
    heard: list[str]
    per_sentence: list[WordErrors]

    @property
    def wer(self) -> float:
        return WordErrors(sum(e.errors for e in self.per_sentence), sum(e.words for e in self.per_sentence)).rate


async def synthesize_inputs(pairs: list[tuple[str, str]], threads: int, raw: bool) -> dict[str, list[Synthesis]]:
    """Every input's syntheses of `pairs`, by `joe` through the engine, one request at a time."""
    config = EngineConfig(model=ModelConfig(model="joe", device="cpu"), mode="inproc", num_threads=threads,
                          capacity=CapacityConfig(max_queue_delay=None, skip_slack_seconds=None))
    written, spoken = [w for w, _ in pairs], [s for _, s in pairs]
    async with EngineClient(config) as client:
        params = client.frontend.default_sampling()
        syntheses = {ENTITY: await engine_sequential(client, written, params),
                     WRITTEN_OUT: await engine_sequential(client, spoken, params)}
        if raw:
            # NOTE: the client prepares prompts in this process, with this front end.
            teacher = client.frontend.teacher
            teacher.normalizes = False
            try:
                syntheses[RAW] = await engine_sequential(client, written, params)
            finally:
                teacher.normalizes = True
    return syntheses


def measure(pairs: list[tuple[str, str]], threads: int = 2, raw: bool = True) -> list[InputResult]:
    """Each input's transcripts and word errors against the spoken forms (the benchmark's core)."""
    syntheses = asyncio.run(synthesize_inputs(pairs, threads, raw))
    transcriber = Transcriber()
    results = []
    for name, runs in syntheses.items():
        heard, per_sentence = [], []
        for (_, spoken), synthesis in zip(pairs, runs):
            heard.append(transcriber.transcribe(synthesis.pcm, synthesis.sample_rate))
            per_sentence.append(WordErrors())
            per_sentence[-1].add(spoken, heard[-1])
        results.append(InputResult(name, heard, per_sentence))
    return results


def report(pairs: list[tuple[str, str]], results: list[InputResult], meta: dict) -> dict:
    by_name = {r.name: r for r in results}
    baseline = by_name[WRITTEN_OUT].wer
    return {
        **meta,
        "inputs": [{"name": r.name, "wer": r.wer, "points_over_written_out": 100 * (r.wer - baseline)}
                   for r in results],
        "target_entity_within_5_points": 100 * (by_name[ENTITY].wer - baseline) <= TARGET_POINTS,
        "sentences": [{"written": written, "spoken": spoken, "normalized": normalize(written).text,
                       "heard": {r.name: r.heard[i] for r in results},
                       "wer": {r.name: r.per_sentence[i].rate for r in results}}
                      for i, (written, spoken) in enumerate(pairs)],
    }


def render(data: dict) -> str:
    lines = [f"# Entity WER: {data['date']} (commit {data['commit']})", "",
             f"`{data['command']}`: {len(data['sentences'])} sentences of evaluation/entities.tsv, `joe` through the "
             f"engine in process, pocketsphinx WER against each sentence's spoken form; torch threads "
             f"{data['threads']}; machine: {data['machine']}; load average {data['load_average']}; "
             f"took {data['wall_seconds']:.0f} s.", "",
             "| input | WER % | points over the written-out input |", "| --- | --- | --- |"]
    lines += [f"| {row['name']} | {100 * row['wer']:.1f} | {row['points_over_written_out']:+.1f} |"
              for row in data["inputs"]]
    lines += ["", f"Target (issue 31), entity input ≤ written-out input + {TARGET_POINTS:.0f} points: "
              f"{'met' if data['target_entity_within_5_points'] else 'not met'}.", "",
              "Per sentence: what the normalizer made of the written form, what the ASR heard of the "
              "entity input, and each input's WER in the order above:", "",
              "| # | written | normalized | heard (entity input) | WER % |", "| --- | --- | --- | --- | --- |"]
    for i, row in enumerate(data["sentences"], 1):
        wers = " / ".join(f"{100 * w:.0f}" for w in row["wer"].values())
        lines.append(f"| {i} | {row['written']} | {row['normalized']} | {row['heard'][ENTITY]} | {wers} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sentences", type=Path, default=ENTITY_SENTENCES, help="written<TAB>spoken, one a line")
    parser.add_argument("--limit", type=int, default=None, help="only the first N sentences")
    parser.add_argument("--threads", type=int, default=2, help="torch threads of the engine core")
    parser.add_argument("--no-raw", action="store_true", help="skip the entity input with normalization bypassed")
    parser.add_argument("--machine", default="2 vCPU x86_64, torch CPU")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    pairs = entity_sentences(args.sentences)[: args.limit]
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    started = time.perf_counter()
    results = measure(pairs, args.threads, raw=not args.no_raw)
    meta = {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "commit": git_commit(),
            "command": " ".join(["python -m benchmarks.entity_wer", *(argv if argv is not None else sys.argv[1:])]),
            "threads": args.threads, "machine": args.machine,
            "load_average": load,
            "wall_seconds": time.perf_counter() - started}
    data = report(pairs, results, meta)
    table = render(data)
    print(table)
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / f"entity-wer-{datetime.now(timezone.utc):%Y-%m-%d}"
    stem.with_suffix(".json").write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    stem.with_suffix(".md").write_text(table)


if __name__ == "__main__":
    main()
