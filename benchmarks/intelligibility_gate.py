"""The intelligibility gate: does a faster path (an int8 decoder, bfloat16 student rows) stay
within one point of WER of the float path, on a set large enough to see one point?

    python -m benchmarks.intelligibility_gate       # --configs CODEC[:PRECISION] ..., --limit N

The set (1,074 sentences, ≈ 11,000 words): evaluation/sentences.txt, the spoken (written-out)
forms of evaluation/entities.tsv and evaluation/held_apart.txt (1,000 sentences of the joe
training corpus that it did not train on). Every sentence is synthesized by `joe` in the engine, in
process, `--streams` at a time, once per configuration; pocketsphinx transcribes each
(benchmarks/asr.py). The first configuration is the reference (default: the float decoder and
float32 student rows); each other's WER difference to it gets a paired bootstrap 95 % interval
(sentences resampled with replacement, the same resample for both). A configuration PASSes when
the interval's upper bound is at most 1 point: a point estimate under 1 point would pass a path
that costs more whenever the sentences happen to favour it, so the burden of proof is on the
faster path, and the report gives the interval's width (a gate that can see one point needs it
well under two). A whole run takes ≈ 7.5 min per configuration on 2 cores (three quarters of it
the ASR): `--reuse` takes configurations already measured over the same
sentences from an earlier result (its speed is then that run's). Its WER would barely move: two
runs of the float path differed in 8 of 373 sentences' transcripts, by 3 errors in all (the
engine's steps batch streams as they come, and one row runs in float16), so a reused reference
adds what a fresh one would. Results: benchmarks/results/intelligibility-gate-<date>.{json,md}.
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

import numpy as np
import torch

from benchmarks.asr import Transcriber, WordErrors
from benchmarks.intelligibility import RESULTS, engine_system, git_commit
from evaluation import entity_sentences, eval_sentences, held_apart_sentences
from model.config import CPU_BATCH_PRECISIONS

TOLERANCE_POINTS = 1.0
DEFAULT_CONFIGS = ("istft-onnxruntime:float32", "istft-int8:float32", "istft-onnxruntime:bfloat16")


def gate_set(limit: int | None = None) -> list[tuple[str, str]]:
    """(part, sentence) for every sentence of the gate (the first `limit` of each part), in a fixed order."""
    parts = {"eval": eval_sentences(), "entities written out": [spoken for _, spoken in entity_sentences()],
             "held apart": held_apart_sentences()}
    return [(part, sentence) for part, sentences in parts.items() for sentence in sentences[:limit]]


@dataclass(frozen=True, slots=True)
class GateConfig:
    """One path through the engine: a joe codec (model/families/joe/codec.py CODEC_CHOICES) and the
    student's CPU batch precision (model/config.py). Invariant: the precision is a valid one."""

    codec: str
    precision: str = "auto"

    @classmethod
    def parse(cls, spec: str) -> GateConfig:
        codec, _, precision = spec.partition(":")
        if (precision or "auto") not in CPU_BATCH_PRECISIONS:
            raise ValueError(f"precision must be one of {CPU_BATCH_PRECISIONS}, got {precision!r} in {spec!r}")
        return cls(codec, precision or "auto")

    @property
    def name(self) -> str:
        return f"{self.codec}:{self.precision}"


@dataclass(frozen=True, slots=True)
class Interval:
    """A WER difference (other - reference, in points) with its bootstrap bounds. Invariant: low <= high."""

    points: float
    low: float
    high: float

    @property
    def width(self) -> float:
        return self.high - self.low


def paired_bootstrap(reference_errors: np.ndarray, other_errors: np.ndarray, words: np.ndarray,
                     resamples: int = 10_000, confidence: float = 0.95, seed: int = 0) -> Interval:
    """The difference of two corpus WERs over the same sentences (errors summed over words summed,
    as benchmarks/asr.py scores a set), with a percentile interval from resampling sentences with
    replacement: each resample weighs both systems' sentences alike, so what the two share (hard
    sentences, the ASR's own mistakes) cancels and the interval is of the difference alone."""
    reference_errors, other_errors, words = (np.asarray(a, np.float64) for a in (reference_errors, other_errors, words))
    if not reference_errors.shape == other_errors.shape == words.shape or words.ndim != 1 or words.sum() <= 0:
        raise ValueError("need one errors count per sentence for each system, and words to score")
    n = words.size
    counts = np.random.default_rng(seed).multinomial(n, np.full(n, 1.0 / n), size=resamples).astype(np.float64)
    resampled_words = np.maximum(counts @ words, 1.0)
    differences = 100 * (counts @ other_errors - counts @ reference_errors) / resampled_words
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(differences, [tail, 100 - tail])
    return Interval(100 * (other_errors.sum() - reference_errors.sum()) / words.sum(), float(low), float(high))


def passes(interval: Interval, tolerance_points: float = TOLERANCE_POINTS) -> bool:
    """Within `tolerance_points` of the reference: judged on the interval's upper bound."""
    return interval.high <= tolerance_points


def score_sentences(texts: list[str], pcms: list[np.ndarray], sample_rate: int,
                    transcriber: Transcriber) -> tuple[list[WordErrors], list[str]]:
    """Each sentence's word errors against its text, and what the ASR heard."""
    scored, heard = [], []
    for text, pcm in zip(texts, pcms):
        heard.append(transcriber.transcribe(pcm, sample_rate))
        scored.append(WordErrors())
        scored[-1].add(text, heard[-1])
    return scored, heard


def wer(errors: list[WordErrors]) -> float:
    return sum(e.errors for e in errors) / max(1, sum(e.words for e in errors))


def measure(config: GateConfig, texts: list[str], threads: int, streams: int, transcriber: Transcriber) -> dict:
    """One configuration's transcripts, per-sentence errors and speed over `texts`."""
    started = time.perf_counter()
    system, speed = asyncio.run(engine_system("joe", texts, [], threads, codec=config.codec,
                                              precision=config.precision, wer_streams=streams))
    synthesis_seconds = time.perf_counter() - started
    run = system.runs[0]
    scored, heard = score_sentences(texts, [s.pcm for s in run], run[0].sample_rate, transcriber)
    return {"name": config.name, "codec": config.codec, "precision": config.precision,
            "wer": wer(scored), "rtf_per_stream": speed["single_stream_rtf"],
            "audio_seconds": sum(s.seconds for s in run), "synthesis_wall_seconds": synthesis_seconds,
            "errors": [e.errors for e in scored], "words": [e.words for e in scored], "heard": heard}


def reusable(path: Path | None, texts: list[str], streams: int) -> dict[str, dict]:
    """The configurations measured in the result at `path`, by name; refused unless it was over
    the same sentences, as many streams at a time."""
    if path is None:
        return {}
    earlier = json.loads(path.read_text())
    if earlier["texts"] != texts or earlier["streams"] != streams:
        raise SystemExit(f"{path} was measured over other sentences or streams: it cannot be reused")
    measured = ("name", "codec", "precision", "wer", "rtf_per_stream", "audio_seconds", "synthesis_wall_seconds",
                "errors", "words", "heard")
    return {row["name"]: {**{k: row[k] for k in measured}, "reused_from": f"{path.name} ({earlier['date']})"}
            for row in earlier["configs"]}


def compare(rows: list[dict], parts: list[str]) -> None:
    """Adds to each row but the first (the reference) its difference to it, interval and verdict,
    and to every row its WER per part of the set."""
    reference = rows[0]
    for row in rows:
        row["wer_per_part"] = {part: wer([WordErrors(e, w) for p, e, w in zip(parts, row["errors"], row["words"])
                                          if p == part]) for part in dict.fromkeys(parts)}
    for row in rows[1:]:
        interval = paired_bootstrap(np.array(reference["errors"]), np.array(row["errors"]), np.array(row["words"]))
        row.update(points_over_reference=interval.points, interval_low=interval.low, interval_high=interval.high,
                   interval_width=interval.width, passes=passes(interval),
                   speed_vs_reference=reference["rtf_per_stream"] / row["rtf_per_stream"])


def render(report: dict) -> str:
    rows = report["configs"]
    parts = list(rows[0]["wer_per_part"])
    lines = [f"# Intelligibility gate: {report['date']} (commit {report['commit']})", "",
             f"`{report['command']}`: {report['sentences']} sentences ({report['words']} words: "
             + ", ".join(f"{n} {p}" for p, n in report["part_sizes"].items())
             + f"), `joe` through the engine in process, {report['streams']} streams at a time, pocketsphinx WER; "
             f"torch threads {report['threads']}; machine: {report['machine']}; load average {report['load_average']}; "
             f"took {report['wall_seconds']:.0f} s.", "",
             "| config | WER % | " + " | ".join(f"{p} %" for p in parts)
             + " | Δ points vs reference [95 % CI] | CI width | within 1 point (upper bound) | RTF per stream"
             " | speed vs reference |",
             "| --- " * (len(parts) + 7) + "|"]
    for row in rows:
        per_part = " | ".join(f"{100 * row['wer_per_part'][p]:.1f}" for p in parts)
        if "points_over_reference" in row:
            delta = (f"{row['points_over_reference']:+.2f} [{row['interval_low']:+.2f}, {row['interval_high']:+.2f}] | "
                     f"{row['interval_width']:.2f} | {'PASS' if row['passes'] else 'FAIL'} | "
                     f"{row['rtf_per_stream']:.3f} | {row['speed_vs_reference']:.2f}x")
        else:
            delta = f"reference | – | – | {row['rtf_per_stream']:.3f} | 1.00x"
        name = row["name"] + (f" (from {row['reused_from']})" if "reused_from" in row else "")
        lines.append(f"| {name} | {100 * row['wer']:.2f} | {per_part} | {delta} |")
    lines += ["", "Δ: the configuration's WER minus the reference's, over the same sentences; the interval is a "
              "paired bootstrap (10,000 resamples of the sentences). RTF: each synthesis's wall time over its audio, "
              "summed over the set, with the other streams of its group running beside it (student and decoder "
              "together)."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", nargs="+", default=list(DEFAULT_CONFIGS),
                        help="CODEC[:PRECISION], the first the reference (precision: auto, bfloat16, float32)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N sentences of each part")
    parser.add_argument("--streams", type=int, default=4, help="syntheses at a time (bfloat16 rows need > 1)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads of the engine core")
    parser.add_argument("--reuse", type=Path, default=None,
                        help="an earlier result JSON of this gate: configurations it measured are taken from it")
    parser.add_argument("--machine", default="2 vCPU x86_64 (AMD EPYC, AVX-512 BF16 and VNNI), torch CPU")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    configs = [GateConfig.parse(spec) for spec in args.configs]
    entries = gate_set(args.limit)
    parts, texts = [p for p, _ in entries], [t for _, t in entries]
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    started = time.perf_counter()
    transcriber = Transcriber()
    earlier = reusable(args.reuse, texts, args.streams)
    rows = [earlier.get(config.name) or measure(config, texts, args.threads, args.streams, transcriber)
            for config in configs]
    compare(rows, parts)
    report = {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "commit": git_commit(),
              "command": " ".join(["python -m benchmarks.intelligibility_gate",
                                   *(argv if argv is not None else sys.argv[1:])]),
              "sentences": len(texts), "words": sum(rows[0]["words"]),
              "part_sizes": {p: parts.count(p) for p in dict.fromkeys(parts)}, "streams": args.streams,
              "threads": args.threads, "machine": args.machine, "load_average": load,
              "wall_seconds": time.perf_counter() - started, "texts": texts, "parts": parts, "configs": rows}
    table = render(report)
    print(table)
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / f"intelligibility-gate-{datetime.now(timezone.utc):%Y-%m-%d-%H%M}"
    stem.with_suffix(".json").write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    stem.with_suffix(".md").write_text(table)


if __name__ == "__main__":
    main()
