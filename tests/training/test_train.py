"""The student's training on a tiny synthetic data set: it learns, it resumes exactly where it
stopped, and its batches cover each utterance's steps exactly once per epoch."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from model.families.joe.student import JoeStudent, StudentConfig
from model.registry import family_name
from training.joe.dataset import bucketed_batches, make_batch
from training.joe.shards import Utterance, shard_path, write_shard
from training.joe.train import StudentTrainer, TrainConfig, validation_loss

SMALL = StudentConfig(hidden_size=32, intermediate_size=64, num_layers=2, num_heads=2, num_kv_heads=1,
                      prenet_size=32, frames_per_step=2)


BASIS = np.random.default_rng(99).normal(size=(4, 192))


def synthetic_utterance(rng: np.random.Generator, index: int) -> Utterance:
    phonemes = rng.integers(1, 100, size=int(rng.integers(4, 12)))
    durations = rng.integers(1, 5, size=phonemes.size)
    frames = int(durations.sum())
    # Like the teacher's: the prior is low-rank and z a function of it, plus a little noise.
    prior = rng.normal(size=(frames, 4)) @ BASIS
    latent = np.tanh(prior) + 0.05 * rng.normal(size=prior.shape)
    prior, latent = prior.astype(np.float16), latent.astype(np.float16)
    return Utterance(f"utterance {index}", "synthetic", 1.0, phonemes.astype(np.int16),
                     durations.astype(np.int16), prior, latent)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    folder = tmp_path_factory.mktemp("joe-data")
    rng = np.random.default_rng(0)
    for shard in range(2):
        write_shard(shard_path(folder, shard), [synthetic_utterance(rng, 50 * shard + i) for i in range(50)])
    return folder


def schedule(steps: int, learning_rate: float = 1e-3) -> TrainConfig:
    return TrainConfig(steps=steps, max_tokens=256, warmup_steps=2, eval_every=1000, seed=3,
                       learning_rate=learning_rate)


def train(data, out, steps: int, learning_rate: float = 1e-3) -> StudentTrainer:
    trainer = StudentTrainer(schedule(steps, learning_rate), SMALL, data, out)
    trainer.try_resume()
    trainer.train()
    return trainer


def test_resumed_training_equals_uninterrupted(data, tmp_path):
    straight = train(data, tmp_path / "straight", steps=12)
    first_half = StudentTrainer(schedule(12), SMALL, data, tmp_path / "resumed")
    first_half.train(stop_at=5)  # interrupted at step 5 of a 12-step schedule
    resumed = train(data, tmp_path / "resumed", steps=12)
    assert resumed.step == straight.step == 12
    for (name, a), (_, b) in zip(straight.student.state_dict().items(), resumed.student.state_dict().items()):
        torch.testing.assert_close(a, b, atol=0, rtol=0, msg=name)


def test_training_lowers_the_loss_and_exports_a_servable_folder(data, tmp_path):
    # 60 steps at 1e-2 reach a third of the untrained loss (measured 0.32; 200 steps at 3e-3: 0.30).
    trainer = train(data, tmp_path / "run", steps=60, learning_rate=1e-2)

    fresh = JoeStudent(SMALL)
    fresh.load_state_dict({k: v for k, v in trainer.student.state_dict().items()
                           if "mean" in k or "std" in k}, strict=False)
    trained, untrained = (validation_loss(m, trainer.valid_split, 256) for m in (trainer.student, fresh))
    assert trained < 0.7 * untrained, (trained, untrained)
    manifest = trainer.export(tmp_path / "export")
    assert manifest["steps_done"] == 60 and len(manifest["sha256"]) == 64
    loaded = JoeStudent.load(tmp_path / "export")
    assert loaded.config == SMALL
    assert family_name(tmp_path / "export") == "joe"  # the server finds the family it wrote
    on_disk = json.loads((tmp_path / "export" / "manifest.json").read_text())
    assert on_disk["parameters"] == sum(p.numel() for p in loaded.parameters())


def test_batches_cover_every_step_once(data):
    student = JoeStudent(SMALL)
    trainer_lengths = np.array([7, 30, 12, 12, 50, 3, 9])
    batches = bucketed_batches(trainer_lengths, max_tokens=60, seed=1)
    assert sorted(np.concatenate(batches).tolist()) == list(range(7))
    assert all(len(b) * trainer_lengths[b].max() <= 60 or len(b) == 1 for b in batches)
    rng = np.random.default_rng(5)
    utterances = [synthetic_utterance(rng, i) for i in range(3)]
    batch = make_batch(student, utterances)
    steps = [SMALL.num_steps(u.num_frames) for u in utterances]
    assert batch.targets.shape == (sum(steps), SMALL.step_channels)
    assert int(batch.target_mask.sum()) == sum(u.num_frames for u in utterances) * 192
    # The first step of each utterance sees zeros as its previous output.
    starts = np.cumsum([0, *steps[:-1]])
    assert all(float(batch.previous[s].abs().sum()) == 0.0 for s in starts)
