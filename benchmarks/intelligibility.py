"""Intelligibility and speed of the built-in voice, in one run:

    python -m benchmarks.intelligibility            # --runs 3, --concurrency 8 16, --quick

Word error rate (pocketsphinx, benchmarks/asr.py) on evaluation/sentences.txt for
  - the teacher (Piper, its default noise: stochastic, mean of --runs syntheses),
  - the teacher without noise (deterministic: exactly what the student is trained to imitate),
  - the student served by the engine (`joe`), with the decoder it serves with (the distilled
    iSTFT decoder) and, for comparison, with the teacher's HiFi-GAN decoder,
  - tiny-random through the engine (random weights: a floor check that the ASR hears noise as noise);
each student sentence's duration against the teacher's; the student's single-stream real-time
factor through the engine (one request at a time); and N concurrent streams, each of which must
finish faster than real time. Results go to benchmarks/results/ as JSON and a markdown table.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import torch

from benchmarks.asr import Transcriber, WordErrors
from capacity.config import CapacityConfig
from engine.client import EngineClient
from engine.config import EngineConfig
from evaluation import EVAL_SENTENCES
from model.config import CPU_BATCH_PRECISIONS, ModelConfig
from model.sampling import SamplingParams

RESULTS = Path(__file__).resolve().parent / "results"
DURATION_RANGE = (0.8, 1.25)


@dataclass(slots=True)
class Synthesis:
    text: str
    pcm: np.ndarray
    sample_rate: int
    wall_seconds: float = 0.0
    ttfa_seconds: float | None = None

    @property
    def seconds(self) -> float:
        return self.pcm.size / self.sample_rate


@dataclass(slots=True)
class SystemResult:
    """One system's syntheses of the whole set (one list per run) and their word errors."""

    name: str
    runs: list[list[Synthesis]] = field(default_factory=list)
    wer_per_run: list[float] = field(default_factory=list)

    @property
    def wer(self) -> float:
        return statistics.fmean(self.wer_per_run)

    def mean_seconds(self, index: int) -> float:
        return statistics.fmean(run[index].seconds for run in self.runs)

    @property
    def rtf(self) -> float:
        """Wall time over audio time, summed over every synthesis (one at a time)."""
        syntheses = [s for run in self.runs for s in run]
        return sum(s.wall_seconds for s in syntheses) / sum(s.seconds for s in syntheses)


def score(result: SystemResult, transcriber: Transcriber) -> None:
    for run in result.runs:
        errors = WordErrors()
        for synthesis in run:
            errors.add(synthesis.text, transcriber.transcribe(synthesis.pcm, synthesis.sample_rate))
        result.wer_per_run.append(errors.rate)


def teacher_runs(sentences: list[str], runs: int, noise: bool) -> SystemResult:
    from model.families.joe.frontend import TeacherFrontend
    from model.families.joe.teacher import FULL_CUT, TeacherScales

    frontend = TeacherFrontend(FULL_CUT, threads=torch.get_num_threads())
    # Piper's own defaults for this voice (noise_scale 0.667, noise_w 0.8), or no noise at all.
    scales = TeacherScales(noise_scale=0.667, noise_w=0.8) if noise else TeacherScales()
    result = SystemResult("teacher (Piper)" if noise else "teacher, no noise")
    for _ in range(runs if noise else 1):
        run = []
        for text in sentences:
            started = time.perf_counter()
            audio = frontend.run(text, scales).audio
            run.append(Synthesis(text, audio, frontend.sample_rate, time.perf_counter() - started))
        result.runs.append(run)
    return result


async def engine_sequential(client: EngineClient, sentences: list[str], params: SamplingParams,
                            streams: int = 1) -> list[Synthesis]:
    """Every sentence, `streams` at a time (1: alone; more: each a row of the others' steps)."""
    out = []
    for i in range(0, len(sentences), streams):
        out += await asyncio.gather(*(_one(client, text, params) for text in sentences[i:i + streams]))
    return out


async def _one(client: EngineClient, text: str, params: SamplingParams) -> Synthesis:
    voice = client.frontend.voices[0]
    started = time.perf_counter()
    pieces, first = [], None
    async for chunk in client.synthesize(text, voice, params):
        if chunk.pcm.size and first is None:
            first = time.perf_counter() - started
        pieces.append(chunk.pcm)
        if chunk.finished and chunk.finish_reason not in ("stop", "length"):
            raise RuntimeError(f"{text!r} ended with {chunk.finish_reason}: {chunk.error}")
    pcm = np.concatenate(pieces) if pieces else np.zeros(0, np.float32)
    return Synthesis(text, pcm, client.sample_rate, time.perf_counter() - started, first)


async def engine_concurrent(client: EngineClient, sentences: list[str], streams: int) -> dict:
    """`streams` requests at once (sentences in turn); each one's RTF is its wall time from
    submission to its last chunk over its audio's duration."""
    params = client.frontend.default_sampling()
    texts = [sentences[i % len(sentences)] for i in range(streams)]
    started = time.perf_counter()
    done = await asyncio.gather(*(_one(client, t, params) for t in texts))
    wall = time.perf_counter() - started
    rtfs = [s.wall_seconds / s.seconds for s in done]
    ttfas = sorted(s.ttfa_seconds for s in done)
    return {"streams": streams, "max_rtf": max(rtfs), "median_rtf": statistics.median(rtfs),
            "all_faster_than_real_time": max(rtfs) < 1.0,
            "ttfa_p50_ms": 1000 * statistics.median(ttfas), "ttfa_max_ms": 1000 * ttfas[-1],
            "audio_seconds_per_wall_second": sum(s.seconds for s in done) / wall}


async def engine_system(model: str, sentences: list[str], concurrency: list[int], threads: int,
                        codec: str | None = None, precision: str = "auto", wer_streams: int = 1
                        ) -> tuple[SystemResult, dict]:
    """`precision`: ModelConfig.cpu_batch_precision; `wer_streams`: the syntheses scored go this
    many at a time (their single-stream speed figures then are of that many streams)."""
    # The voice's own speed: every stream admitted and stepped (admission and skipping are the
    # serving benchmark's, benchmarks/serving.py).
    model_config = ModelConfig(model=model, codec=codec, device="cpu", cpu_batch_precision=precision)
    config = EngineConfig(model=model_config, mode="inproc", num_threads=threads,
                          capacity=CapacityConfig(max_queue_delay=None, skip_slack_seconds=None))
    if model == "tiny-random":
        name = f"`{model}` through the engine"
    else:
        name = f"student (`{Path(model).name}`) through the engine, {codec or 'istft'} decoder"
        if precision != "auto":
            name += f", several rows in {precision}"
    if wer_streams > 1:
        name += f", {wer_streams} streams at a time"
    result = SystemResult(name)
    speed: dict = {}
    async with EngineClient(config) as client:
        params = client.frontend.default_sampling()
        if model == "tiny-random":
            # Orpheus-shaped: no known length; give it the API's budget for the longest sentence.
            params = params.replace(max_tokens=82 * 6, seed=0)
        await _one(client, "Warm up.", params)
        run = await engine_sequential(client, sentences, params, wer_streams)
        result.runs.append(run)
        speed["single_stream_rtf"] = sum(s.wall_seconds for s in run) / sum(s.seconds for s in run)
        speed["single_stream_ttfa_p50_ms"] = 1000 * statistics.median(s.ttfa_seconds for s in run)
        speed["concurrent"] = [await engine_concurrent(client, sentences, n) for n in concurrency]
    return result, speed


def git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True, cwd=Path(__file__).parent).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def render(report: dict) -> str:
    lines = [f"# Intelligibility: {report['date']} (commit {report['commit']})", "",
             f"{report['sentences']} sentences of evaluation/sentences.txt; pocketsphinx WER; "
             f"torch threads {report['threads']}; machine: {report['machine']}", "",
             "| system | WER % (per run) | single-stream RTF | TTFA p50 ms |", "| --- | --- | --- | --- |"]
    # NOTE: the teacher's RTF is a whole utterance through onnxruntime (no streaming, no engine).
    for row in report["systems"]:
        runs = ", ".join(f"{100 * w:.1f}" for w in row["wer_per_run"])
        rtf = f"{row['rtf']:.3f}" if row.get("rtf") is not None else "–"
        ttfa = f"{row['ttfa_p50_ms']:.0f}" if row.get("ttfa_p50_ms") is not None else "–"
        lines.append(f"| {row['name']} | {100 * row['wer']:.1f} ({runs}) | {rtf} | {ttfa} |")
    d = report["durations"]
    lines += ["", "Teacher RTF: whole utterances through onnxruntime, one at a time (nothing streamed); "
              "engine RTF: one request at a time, streamed, from submission to the last chunk."]
    lines += ["", f"Student duration / teacher duration (teacher: mean of its runs): min {d['min']:.3f}, "
              f"max {d['max']:.3f}; all within {DURATION_RANGE}: {d['all_within']}", "",
              "| concurrent streams | max RTF | median RTF | all faster than real time | TTFA p50 / max ms | audio s per s |",
              "| --- | --- | --- | --- | --- | --- |"]
    for c in report["concurrent"]:
        lines.append(f"| {c['streams']} | {c['max_rtf']:.3f} | {c['median_rtf']:.3f} | {c['all_faster_than_real_time']} "
                     f"| {c['ttfa_p50_ms']:.0f} / {c['ttfa_max_ms']:.0f} | {c['audio_seconds_per_wall_second']:.1f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="syntheses of the stochastic teacher")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[8, 16])
    parser.add_argument("--threads", type=int, default=2, help="torch threads (engine core and teacher)")
    parser.add_argument("--sentences", type=Path, default=EVAL_SENTENCES)
    parser.add_argument("--limit", type=int, default=None, help="only the first N sentences")
    parser.add_argument("--student", default="joe", help="the student to measure: joe (shipped) or a weights folder")
    parser.add_argument("--no-floor", action="store_true", help="skip tiny-random (quicker checks during training)")
    parser.add_argument("--no-reference-codec", action="store_true",
                        help="skip the student through the teacher's HiFi-GAN decoder")
    parser.add_argument("--also-codec", action="append", default=[],
                        help="the student through this codec too (e.g. istft-int8), a row of its own; repeatable")
    parser.add_argument("--also-precision", action="append", default=[], choices=CPU_BATCH_PRECISIONS,
                        help="also score the student with its products of several rows in this precision")
    parser.add_argument("--wer-streams", type=int, default=1,
                        help="the student's scored syntheses this many at a time (bfloat16 rows need > 1)")
    parser.add_argument("--machine", default="2-core x86_64 CPU, torch CPU")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    sentences = [s for s in args.sentences.read_text().splitlines() if s.strip()][: args.limit]
    transcriber = Transcriber()

    teacher = teacher_runs(sentences, args.runs, noise=True)
    teacher_quiet = teacher_runs(sentences, 1, noise=False)
    student, speed = asyncio.run(engine_system(args.student, sentences, args.concurrency, args.threads,
                                               wer_streams=args.wer_streams))
    systems = [teacher, teacher_quiet, student]
    if not args.no_reference_codec:
        reference, reference_speed = asyncio.run(
            engine_system(args.student, sentences, [], args.threads, codec="hifigan"))
        systems.append(reference)
    others = [(codec, *asyncio.run(engine_system(args.student, sentences, [], args.threads, codec=codec,
                                                 wer_streams=args.wer_streams)))
              for codec in args.also_codec]
    others += [(None, *asyncio.run(engine_system(args.student, sentences, [], args.threads, precision=precision,
                                                 wer_streams=args.wer_streams)))
               for precision in args.also_precision]
    systems += [system for _, system, _ in others]
    if not args.no_floor:
        floor, floor_speed = asyncio.run(engine_system("tiny-random", sentences, [], args.threads))
        systems.append(floor)
    for system in systems:
        score(system, transcriber)

    ratios = [student.runs[0][i].seconds / teacher.mean_seconds(i) for i in range(len(sentences))]
    report = {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "commit": git_commit(),
        "sentences": len(sentences), "threads": args.threads, "machine": args.machine,
        "systems": [
            {"name": teacher.name, "wer": teacher.wer, "wer_per_run": teacher.wer_per_run, "rtf": teacher.rtf},
            {"name": teacher_quiet.name, "wer": teacher_quiet.wer, "wer_per_run": teacher_quiet.wer_per_run,
             "rtf": teacher_quiet.rtf},
            {"name": student.name, "wer": student.wer, "wer_per_run": student.wer_per_run,
             "rtf": speed["single_stream_rtf"], "ttfa_p50_ms": speed["single_stream_ttfa_p50_ms"]},
        ] + ([] if args.no_reference_codec else [
            {"name": reference.name, "wer": reference.wer, "wer_per_run": reference.wer_per_run,
             "rtf": reference_speed["single_stream_rtf"], "ttfa_p50_ms": reference_speed["single_stream_ttfa_p50_ms"]}
        ]) + [{"name": system.name, "wer": system.wer, "wer_per_run": system.wer_per_run,
               "rtf": other_speed["single_stream_rtf"], "ttfa_p50_ms": other_speed["single_stream_ttfa_p50_ms"]}
              for _, system, other_speed in others] + ([] if args.no_floor else [
            {"name": floor.name, "wer": floor.wer, "wer_per_run": floor.wer_per_run,
             "rtf": floor_speed["single_stream_rtf"], "ttfa_p50_ms": floor_speed["single_stream_ttfa_p50_ms"]}]),
        "durations": {"min": min(ratios), "max": max(ratios), "per_sentence": ratios,
                      "all_within": all(DURATION_RANGE[0] <= r <= DURATION_RANGE[1] for r in ratios)},
        "concurrent": speed["concurrent"],
        "targets": {"student_wer_within_5_points": student.wer <= teacher.wer + 0.05,
                    "single_stream_rtf_at_most_0.1": speed["single_stream_rtf"] <= 0.1,
                    "8_streams_faster_than_real_time": any(c["streams"] >= 8 and c["all_faster_than_real_time"]
                                                           for c in speed["concurrent"])},
    }
    table = render(report)
    print(table)
    print(json.dumps(report["targets"]))
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / f"intelligibility-{datetime.now(timezone.utc):%Y-%m-%d-%H%M}"
    stem.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")
    stem.with_suffix(".md").write_text(table)


if __name__ == "__main__":
    main()
