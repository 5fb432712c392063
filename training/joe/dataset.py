"""Teacher utterances in memory → length-bucketed, teacher-forced batches for the student."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from model.families.joe.student import JoeStudent
from training.joe.dense import StudentBatch
from training.joe.shards import Utterance, iter_utterances


@dataclass(slots=True)
class Split:
    """Utterances of one split and their sequence lengths (phonemes + steps) for bucketing."""

    utterances: list[Utterance]
    lengths: np.ndarray


def load_splits(folder: Path, frames_per_step: int, holdout_every: int = 100,
                limit: int | None = None) -> tuple[Split, Split]:
    """(train, validation): every `holdout_every`-th utterance is held out."""
    train: list[Utterance] = []
    valid: list[Utterance] = []
    for index, utterance in enumerate(iter_utterances(folder)):
        if limit is not None and index >= limit:
            break
        (valid if index % holdout_every == holdout_every - 1 else train).append(utterance)
    if not train:
        raise FileNotFoundError(f"no teacher data in {folder}: run python -m training.joe.make_data")

    def split(utterances: list[Utterance]) -> Split:
        lengths = np.array([len(u.phoneme_ids) + -(-u.num_frames // frames_per_step) for u in utterances])
        return Split(utterances, lengths)

    return split(train), split(valid)


def channel_statistics(utterances: Sequence[Utterance], field: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-channel mean and std of the prior or latent frames (float64 sums, float32 result)."""
    count, sums, squares = 0, None, None
    for utterance in utterances:
        frames = getattr(utterance, field).astype(np.float64)
        sums = frames.sum(0) if sums is None else sums + frames.sum(0)
        squares = (frames ** 2).sum(0) if squares is None else squares + (frames ** 2).sum(0)
        count += len(frames)
    mean = sums / count
    std = np.sqrt(np.maximum(squares / count - mean ** 2, 1e-8))
    return torch.from_numpy(mean).float(), torch.from_numpy(std).float()


def bucketed_batches(lengths: np.ndarray, max_tokens: int, seed: int) -> list[np.ndarray]:
    """Index batches whose padded size (rows × longest row) stays within max_tokens, made of
    utterances of similar length; their order is shuffled from `seed`."""
    rng = np.random.default_rng(seed)
    # Sorting by length with random tie-breaking, then cutting, keeps padding small while the
    # contents of each batch still change from epoch to epoch.
    order = np.lexsort((rng.random(len(lengths)), lengths))
    batches, current, longest = [], [], 0
    for index in order:
        longest_if_added = max(longest, int(lengths[index]))
        if current and longest_if_added * (len(current) + 1) > max_tokens:
            batches.append(np.array(current))
            current, longest_if_added = [], int(lengths[index])
        current.append(index)
        longest = longest_if_added
    if current:
        batches.append(np.array(current))
    rng.shuffle(batches)
    return batches


@torch.no_grad()
def make_batch(student: JoeStudent, utterances: Sequence[Utterance]) -> StudentBatch:
    """Teacher forcing: each step's `previous` is the true z of the step before it."""
    cfg = student.config
    step = cfg.step_channels
    windows, previous, targets, masks, steps = [], [], [], [], []
    for utterance in utterances:
        num_steps = cfg.num_steps(utterance.num_frames)
        latent = student.normalize_latent(torch.from_numpy(utterance.latent.astype(np.float32)))
        pad = num_steps * cfg.frames_per_step - utterance.num_frames
        grouped = F.pad(latent, (0, 0, 0, pad)).reshape(num_steps, step)
        mask = F.pad(torch.ones_like(latent), (0, 0, 0, pad)).reshape(num_steps, step)
        windows.append(student.prior_windows(torch.from_numpy(utterance.prior.astype(np.float32))))
        previous.append(torch.cat([grouped.new_zeros(1, step), grouped[:-1]]))
        targets.append(grouped)
        masks.append(mask)
        steps.append(num_steps)
    num_phonemes = torch.tensor([len(u.phoneme_ids) for u in utterances])
    num_steps = torch.tensor(steps)
    ids = torch.zeros(len(utterances), int((num_phonemes + num_steps).max()), dtype=torch.long)
    for row, utterance in enumerate(utterances):
        ids[row, : len(utterance.phoneme_ids)] = torch.from_numpy(utterance.phoneme_ids.astype(np.int64))
    return StudentBatch(ids, num_phonemes, num_steps, torch.cat(windows), torch.cat(previous),
                        torch.cat(targets), torch.cat(masks))


def iterate_batches(student: JoeStudent, split: Split, max_tokens: int, seed: int,
                    skip: int = 0) -> Iterator[StudentBatch]:
    for indices in bucketed_batches(split.lengths, max_tokens, seed)[skip:]:
        yield make_batch(student, [split.utterances[i] for i in indices])
