"""Teacher data for the joe student, in one command (seeded, resumable, with a progress bar):

    python -m training.joe.make_data --workers 2           # ≈ 10 h of speech, see README.md

Writes, under --out (default $CHORUS_CACHE/voices/joe/data): manifest.json (the settings and,
once done, the totals), corpus.jsonl (the sentences, in utterance order) and shard-NNNNN.npz
files (training/joe/shards.py). A rerun skips the shards already written.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
from tqdm import tqdm

from evaluation import EVAL_SENTENCES
from model.families.joe.frontend import TeacherFrontend
from model.families.joe.teacher import LATENT_CUT, TeacherScales
from model.paths import voice_cache
from training.joe.corpus import CorpusConfig, CorpusSentence, build_corpus, read_sentences
from training.joe.shards import Utterance, shard_frame_count, shard_path, write_shard

FRAMES_PER_SECOND = 22050 / 256


@dataclass(slots=True)
class DataConfig:
    """One data set. Invariant: utterance i always gets corpus sentence i and the i-th draw of
    length_scale from `seed`, so a resumed run writes what an uninterrupted one would."""

    out: Path = field(default_factory=lambda: voice_cache("joe") / "data")
    utterances: int = 12_000
    shard_size: int = 250
    workers: int = 1
    seed: int = 0
    # Per-utterance length_scale range: tempo variety, so the student follows `speed`.
    length_scale_range: tuple[float, float] = (0.85, 1.15)
    exclude: Path = EVAL_SENTENCES
    source_roots: tuple[Path, ...] = ()

    def __post_init__(self) -> None:
        if self.utterances < 1 or self.shard_size < 1 or self.workers < 1:
            raise ValueError("utterances, shard_size and workers must be >= 1")
        low, high = self.length_scale_range
        if not 0 < low <= high:
            raise ValueError(f"bad length_scale_range {self.length_scale_range}")
        if not Path(self.exclude).is_file():
            raise FileNotFoundError(f"evaluation sentences to exclude not found: {self.exclude}")

    def settings(self) -> dict:
        """What must match for a rerun to resume (workers and paths do not change the data)."""
        settings = asdict(self)
        for name in ("out", "workers", "exclude", "source_roots"):
            settings.pop(name)
        settings["length_scale_range"] = list(self.length_scale_range)
        settings["excluded_sentences"] = len(read_sentences(Path(self.exclude)))
        return settings


def generate(config: DataConfig) -> dict:
    """Writes every missing shard; returns the totals also stored in manifest.json."""
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    _check_manifest(out / "manifest.json", config.settings())
    corpus = _load_or_build_corpus(out / "corpus.jsonl", config)
    low, high = config.length_scale_range
    scales = np.random.default_rng(config.seed).uniform(low, high, config.utterances)
    jobs = [
        (index, corpus[index], float(scales[index]))
        for shard in range(-(-config.utterances // config.shard_size))
        if not shard_path(out, shard).is_file()
        for index in range(shard * config.shard_size,
                           min((shard + 1) * config.shard_size, config.utterances))
    ]
    started = time.perf_counter()
    frames = 0
    with tqdm(total=config.utterances, initial=config.utterances - len(jobs), unit="utt") as bar:
        pending: list[Utterance] = []
        for index, utterance in zip((job[0] for job in jobs), _run(jobs, config.workers)):
            pending.append(utterance)
            frames += utterance.num_frames
            bar.update()
            if (index + 1) % config.shard_size == 0 or index + 1 == config.utterances:
                write_shard(shard_path(out, index // config.shard_size), pending)
                pending = []
    wall = time.perf_counter() - started
    counts = [shard_frame_count(path) for path in sorted(out.glob("shard-*.npz"))]
    totals = {
        "utterances": sum(n for n, _ in counts),
        "frames": sum(f for _, f in counts),
        "hours": round(sum(f for _, f in counts) / FRAMES_PER_SECOND / 3600, 3),
        "this_run": {
            "utterances": len(jobs),
            "wall_s": round(wall, 2),
            "utterances_per_s": round(len(jobs) / wall, 3) if jobs else None,
            "audio_s_per_wall_s": round(frames / FRAMES_PER_SECOND / wall, 2) if jobs else None,
            "workers": config.workers,
        },
    }
    manifest = {"settings": config.settings(), "totals": totals}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return totals


def _check_manifest(path: Path, settings: dict) -> None:
    if path.is_file():
        found = json.loads(path.read_text(encoding="utf-8"))["settings"]
        if found != settings:
            raise SystemExit(f"{path} was written with other settings ({found}); "
                             "use another --out or delete that folder")
    else:
        path.write_text(json.dumps({"settings": settings}, indent=2) + "\n", encoding="utf-8")


def _load_or_build_corpus(path: Path, config: DataConfig) -> list[CorpusSentence]:
    if path.is_file():
        lines = path.read_text(encoding="utf-8").splitlines()
        return [CorpusSentence(**json.loads(line)) for line in lines]
    corpus_config = CorpusConfig(
        size=config.utterances, seed=config.seed, source_roots=config.source_roots
    )
    corpus = build_corpus(corpus_config, read_sentences(Path(config.exclude)))
    staging = path.with_suffix(".tmp")
    staging.write_text("".join(json.dumps(asdict(s)) + "\n" for s in corpus), encoding="utf-8")
    os.replace(staging, path)
    return corpus


_frontend: TeacherFrontend | None = None


def _synthesize(job: tuple[int, CorpusSentence, float]) -> Utterance:
    global _frontend
    if _frontend is None:
        _frontend = TeacherFrontend(LATENT_CUT, threads=1)
    _, sentence, length_scale = job
    result = _frontend.run(sentence.text, TeacherScales(length_scale=length_scale))
    return Utterance(sentence.text, sentence.category, length_scale, result.phoneme_ids,
                     result.durations, result.prior, result.latent)


def _run(jobs: list, workers: int) -> Iterator[Utterance]:
    # One single-threaded onnxruntime session per worker process: on few cores, processes
    # scale better than intra-op threads on these small per-utterance graphs.
    if workers == 1:
        yield from map(_synthesize, jobs)
        return
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        yield from pool.imap(_synthesize, jobs, chunksize=4)


def main(argv: Sequence[str] | None = None) -> None:
    defaults = DataConfig.__dataclass_fields__
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--utterances", type=int, default=defaults["utterances"].default)
    parser.add_argument("--shard-size", type=int, default=defaults["shard_size"].default)
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--seed", type=int, default=defaults["seed"].default)
    parser.add_argument("--length-scale-range", type=float, nargs=2,
                        default=defaults["length_scale_range"].default)
    parser.add_argument("--exclude", type=Path, default=EVAL_SENTENCES)
    parser.add_argument("--source-root", type=Path, action="append", default=[],
                        help="folder whose .py docstrings feed the corpus (default: stdlib and "
                        "installed packages; repeatable)")
    args = parser.parse_args(argv)
    config = DataConfig(
        utterances=args.utterances, shard_size=args.shard_size, workers=args.workers,
        seed=args.seed, length_scale_range=tuple(args.length_scale_range),
        exclude=args.exclude, source_roots=tuple(args.source_root),
        **({"out": args.out} if args.out else {}),
    )
    json.dump(generate(config), sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
