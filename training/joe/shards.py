"""The teacher data on disk: shards of utterances, one uncompressed .npz file each.

A shard of n utterances holds, concatenated over its utterances, with offsets [n + 1]:
    phoneme_ids, durations (int16) at phoneme_offsets; prior, latent (float16 [frames, 192]) at
    frame_offsets; and per utterance text, category (str) and length_scale (float32).
"""
from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np

SHARD_PATTERN = "shard-*.npz"


@dataclass(slots=True)
class Utterance:
    """One teacher utterance, frame-major. Invariant: durations.sum() == len(prior) ==
    len(latent), and len(durations) == len(phoneme_ids)."""

    text: str
    category: str
    length_scale: float
    phoneme_ids: np.ndarray
    durations: np.ndarray
    prior: np.ndarray
    latent: np.ndarray

    def __post_init__(self) -> None:
        if len(self.durations) != len(self.phoneme_ids):
            raise ValueError("one duration per phoneme id is required")
        frames = int(self.durations.sum())
        if self.prior.shape[0] != frames or self.latent.shape != self.prior.shape:
            raise ValueError(f"durations sum to {frames} frames; prior {self.prior.shape}, "
                             f"latent {self.latent.shape}")

    @property
    def num_frames(self) -> int:
        return int(self.prior.shape[0])


def shard_path(folder: Path, index: int) -> Path:
    return folder / f"shard-{index:05d}.npz"


def write_shard(path: Path, utterances: Sequence[Utterance]) -> None:
    """Written aside and renamed, so that a shard file that exists is always complete."""
    def offsets(lengths: list[int]) -> np.ndarray:
        return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)

    arrays = {
        "text": np.array([u.text for u in utterances], dtype=str),
        "category": np.array([u.category for u in utterances], dtype=str),
        "length_scale": np.array([u.length_scale for u in utterances], dtype=np.float32),
        "phoneme_offsets": offsets([len(u.phoneme_ids) for u in utterances]),
        "phoneme_ids": np.concatenate([u.phoneme_ids for u in utterances]).astype(np.int16),
        "durations": np.concatenate([u.durations for u in utterances]).astype(np.int16),
        "frame_offsets": offsets([u.num_frames for u in utterances]),
        "prior": np.concatenate([u.prior for u in utterances]).astype(np.float16),
        "latent": np.concatenate([u.latent for u in utterances]).astype(np.float16),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, staging = tempfile.mkstemp(suffix=".npz.tmp", dir=path.parent)
    with os.fdopen(handle, "wb") as file:
        np.savez(file, **arrays)
    os.chmod(staging, 0o644)
    os.replace(staging, path)


def read_shard(path: Path) -> list[Utterance]:
    with np.load(path, allow_pickle=False) as shard:
        data = {key: shard[key] for key in shard.files}
    phonemes, frames = data["phoneme_offsets"], data["frame_offsets"]
    return [
        Utterance(
            text=str(data["text"][i]),
            category=str(data["category"][i]),
            length_scale=float(data["length_scale"][i]),
            phoneme_ids=data["phoneme_ids"][phonemes[i] : phonemes[i + 1]],
            durations=data["durations"][phonemes[i] : phonemes[i + 1]],
            prior=data["prior"][frames[i] : frames[i + 1]],
            latent=data["latent"][frames[i] : frames[i + 1]],
        )
        for i in range(len(data["text"]))
    ]


def shard_frame_count(path: Path) -> tuple[int, int]:
    """(utterances, frames) of a shard, without reading its frames."""
    with np.load(path, allow_pickle=False) as shard:
        offsets = shard["frame_offsets"]
    return len(offsets) - 1, int(offsets[-1])


def iter_utterances(folder: Path) -> Iterator[Utterance]:
    for path in sorted(folder.glob(SHARD_PATTERN)):
        yield from read_shard(path)
