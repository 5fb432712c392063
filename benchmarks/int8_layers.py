"""Which of the int8 decoder's convolutions cost the words: per-layer sensitivity.

    python -m benchmarks.int8_layers                # --lsd-sentences 60, --wer-variants 4, --limit N

Each variant is the incremental iSTFT graph quantized by model/families/joe/quantize.py with one
convolution kept float ("float: X") or with only one quantized ("only: X") (unless --no-sweep),
besides the all-int8 graph (only the projection to the spectrum and the iSTFT basis float, as always) and
`--variant` sets of your own. The decoders run on the teacher's latents of the intelligibility
gate's sentences (benchmarks/intelligibility_gate.py), so that only the decoder differs:
  - log-spectral distance to the float decoder's audio (median over frames, pooled over the first
    --lsd-sentences sentences): cheap, it ranks every variant;
  - WER over the whole gate set (pocketsphinx), with the paired bootstrap interval of its
    difference to the float decoder, for the float graph, the all-int8 one and the
    --wer-variants variants of the "float: X" kind that LSD ranks best, plus every --variant;
  - the decoder's time on its own calls: each latent fed in the engine's chunks (8 frames, then
    as long as all before it, up to 128), the sum over the sentences, fastest of --repeats, and
    its ratio to the float graph's.
Results: benchmarks/results/int8-layers-<date>.{json,md}.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import torch

from benchmarks.asr import Transcriber
from benchmarks.intelligibility import RESULTS, git_commit
from benchmarks.intelligibility_gate import gate_set, paired_bootstrap, score_sentences
from model.codecs.base import FrameCodec
from model.families.joe.codec import INCREMENTAL_GRAPH, SHIPPED_DECODER, load_joe_codec
from model.families.joe.istft import onnx_path
from model.families.joe.quantize import ALWAYS_FLOAT, CONV_ROLES, calibration_feeds, default_recipe, quantize_graph
from model.families.joe.teacher import voice_key

FLOAT = "float graph"
ALL_INT8 = "all int8"


def log_spectral_distance(reference: np.ndarray, other: np.ndarray) -> np.ndarray:
    """Per frame (1024-sample Hann windows, hop 256), the RMS difference of the two log-magnitude
    spectra in dB, over the frames within 60 dB of the reference's loudest."""
    def spectrum(x: np.ndarray) -> np.ndarray:
        frames = np.lib.stride_tricks.sliding_window_view(x.astype(np.float64), 1024)[::256] * np.hanning(1024)
        return 20 * np.log10(np.abs(np.fft.rfft(frames, axis=-1)) + 1e-5)

    a, b = spectrum(reference), spectrum(other)
    keep = a.max(axis=1) > a.max() - 60
    return np.sqrt(np.mean((a[keep] - b[keep]) ** 2, axis=1))


def engine_chunks(frames: int, first: int = 8, largest: int = 128) -> list[int]:
    """The chunk lengths the engine decodes a stream of `frames` in (codec.JoeFrameCodec.window_hints)."""
    chunks: list[int] = []
    while sum(chunks) < frames:
        chunks.append(min(frames - sum(chunks), first if not chunks else min(largest, sum(chunks))))
    return chunks


def decode_seconds(codec: FrameCodec, latents: list[torch.Tensor], repeats: int) -> float:
    """The incremental decoder's own time over every latent fed in the engine's chunks, fastest of `repeats`."""
    decoder = codec.incremental
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        for z in latents:
            state, fed = decoder.initial_state(), 0
            for size in engine_chunks(len(z)):
                _, (state,) = decoder.decode(z[None, fed:fed + size], [state], [fed], [len(z)])
                fed += size
        best = min(best, time.perf_counter() - started)
    return best


def extra_name(keep: tuple[int, ...]) -> str:
    return "float: " + ", ".join(CONV_ROLES[i] for i in keep)


def variants(extra: list[tuple[int, ...]], sweep: bool) -> dict[str, tuple[int, ...]]:
    """Name → the convolutions kept float: the all-int8 graph, with `sweep` each convolution kept
    float alone and quantized alone, and the `extra` sets."""
    quantizable = [i for i in range(len(CONV_ROLES)) if i not in ALWAYS_FLOAT] if sweep else []
    out = {ALL_INT8: ALWAYS_FLOAT}
    out |= {f"float: {CONV_ROLES[i]}": tuple(sorted({*ALWAYS_FLOAT, i})) for i in quantizable}
    out |= {f"only: {CONV_ROLES[i]}": tuple(j for j in range(len(CONV_ROLES)) if j != i) for i in quantizable}
    out |= {extra_name(keep): tuple(sorted({*ALWAYS_FLOAT, *keep})) for keep in extra}
    return out


def run(texts: list[str], lsd_sentences: int, wer_variants: int, extra: list[tuple[int, ...]], sweep: bool,
        repeats: int, graphs: Path) -> tuple[list[dict], float]:
    """Every variant's row (the float graph's first), and the seconds of audio timed."""
    from model.families.joe.frontend import TeacherFrontend
    from model.families.joe.teacher import LATENT_CUT

    float_codec = load_joe_codec(codec="istft-onnxruntime")
    float_graph = onnx_path(SHIPPED_DECODER, voice_key(), INCREMENTAL_GRAPH)
    # NOTE: every variant calibrated as the served graph is (its sentences, its pieces).
    feeds = calibration_feeds(float_graph, default_recipe())
    frontend = TeacherFrontend(LATENT_CUT, threads=torch.get_num_threads())
    latents = [torch.from_numpy(frontend.run(text).latent) for text in texts]
    reference = [float_codec.decode(z[None])[0].numpy() for z in latents]
    transcriber = Transcriber()

    def scored(audio: list[np.ndarray]) -> dict:
        errors, heard = score_sentences(texts, audio, float_codec.sample_rate, transcriber)
        return {"errors": [e.errors for e in errors], "words": [e.words for e in errors], "heard": heard}

    float_row = {"name": FLOAT, "float_convs": list(range(len(CONV_ROLES))), "lsd_median_db": 0.0,
                 "decode_seconds": decode_seconds(float_codec, latents[:lsd_sentences], repeats), **scored(reference)}
    rows, codecs = [float_row], {}
    for name, keep in variants(extra, sweep).items():
        graph = quantize_graph(float_graph, graphs / f"{len(codecs)}.onnx", feeds, keep)
        codecs[name] = codec = load_joe_codec(codec="istft-int8", int8_graph=graph)
        distances = np.concatenate([log_spectral_distance(ref, codec.decode(z[None])[0].numpy())
                                    for ref, z in zip(reference[:lsd_sentences], latents)])
        rows.append({"name": name, "float_convs": list(keep), "lsd_median_db": float(np.median(distances)),
                     "lsd_p95_db": float(np.percentile(distances, 95)),
                     "decode_seconds": decode_seconds(codec, latents[:lsd_sentences], repeats)})
    # NOTE: the float graph again after every variant, so that a drift of the machine's load shows.
    float_row["decode_seconds_after"] = decode_seconds(float_codec, latents[:lsd_sentences], repeats)
    singles = [r for r in rows if r["name"].startswith("float: ") and len(r["float_convs"]) == len(ALWAYS_FLOAT) + 1]
    ranked = sorted(singles, key=lambda r: r["lsd_median_db"])
    chosen = {ALL_INT8, *(r["name"] for r in ranked[:wer_variants]), *map(extra_name, extra)}
    for row in rows[1:]:
        if row["name"] in chosen:
            row |= scored([codecs[row["name"]].decode(z[None])[0].numpy() for z in latents])
    for row in rows:
        row["decode_ratio_to_float"] = row["decode_seconds"] / float_row["decode_seconds"]
        if "errors" in row:
            row["wer"] = sum(row["errors"]) / sum(row["words"])
            if row is not float_row:
                interval = paired_bootstrap(np.array(float_row["errors"]), np.array(row["errors"]),
                                            np.array(row["words"]))
                row |= {"points_over_float": interval.points, "interval_low": interval.low,
                        "interval_high": interval.high}
    frames = sum(len(z) for z in latents[:lsd_sentences])
    return rows, frames * float_codec.samples_per_frame / float_codec.sample_rate


def render(report: dict) -> str:
    lines = [f"# int8 decoder, per layer: {report['date']} (commit {report['commit']})", "",
             f"`{report['command']}`: the teacher's latents of {report['sentences']} gate sentences; LSD over the "
             f"first {report['lsd_sentences']}, decoder time on the same ({report['audio_seconds']:.0f} s of audio, in "
             f"the engine's chunks, fastest of {report['repeats']}); torch threads {report['threads']}; machine: "
             f"{report['machine']}; load average {report['load_average']}; float graph "
             f"{report['float_decode_seconds']:.2f} s before the variants, "
             f"{report['float_decode_seconds_after']:.2f} s after.", "",
             "| variant | LSD median / p95 dB | WER % | Δ points vs float [95 % CI] | decoder s | ratio to float |",
             "| --- | --- | --- | --- | --- | --- |"]
    for row in report["variants"]:
        lsd = f"{row['lsd_median_db']:.2f} / {row.get('lsd_p95_db', 0.0):.2f}"
        wer = f"{100 * row['wer']:.2f}" if "wer" in row else "–"
        delta = (f"{row['points_over_float']:+.2f} [{row['interval_low']:+.2f}, {row['interval_high']:+.2f}]"
                 if "points_over_float" in row else "–")
        lines.append(f"| {row['name']} | {lsd} | {wer} | {delta} | {row['decode_seconds']:.3f} | "
                     f"{row['decode_ratio_to_float']:.2f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lsd-sentences", type=int, default=60)
    parser.add_argument("--wer-variants", type=int, default=4, help="'float: X' variants scored by WER, best LSD first")
    parser.add_argument("--variant", action="append", default=[],
                        help="convolutions (indices into quantize.CONV_ROLES, comma-separated) kept float; repeatable")
    parser.add_argument("--no-sweep", action="store_true", help="only the all-int8 graph and the --variant sets")
    parser.add_argument("--limit", type=int, default=None, help="only the first N sentences of each part of the set")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--machine", default="2 vCPU x86_64 (AMD EPYC, AVX-512 BF16 and VNNI), torch CPU")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    texts = [t for _, t in gate_set(args.limit)]
    extra = [tuple(int(i) for i in spec.split(",")) for spec in args.variant]
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    with tempfile.TemporaryDirectory() as graphs:
        rows, audio_seconds = run(texts, args.lsd_sentences, args.wer_variants, extra, not args.no_sweep, args.repeats,
                                  Path(graphs))
    float_row = rows[0]
    report = {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "commit": git_commit(),
              "command": " ".join(["python -m benchmarks.int8_layers", *(argv if argv is not None else sys.argv[1:])]),
              "sentences": len(texts), "lsd_sentences": min(args.lsd_sentences, len(texts)), "repeats": args.repeats,
              "threads": args.threads, "machine": args.machine, "load_average": load,
              "float_decode_seconds": float_row["decode_seconds"],
              "float_decode_seconds_after": float_row["decode_seconds_after"], "audio_seconds": audio_seconds,
              "texts": texts, "variants": rows}
    table = render(report)
    print(table)
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / f"int8-layers-{datetime.now(timezone.utc):%Y-%m-%d-%H%M}"
    stem.with_suffix(".json").write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    stem.with_suffix(".md").write_text(table)


if __name__ == "__main__":
    main()
