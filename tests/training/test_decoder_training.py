"""The iSTFT decoder head's training: its distillation loss, and on a tiny synthetic data set it
learns, resumes exactly, and decodes the student's predictions against the teacher's audio."""
from __future__ import annotations

import numpy as np
import torch

from tests.voice_packages import require_voice_packages

require_voice_packages()

from model.families.joe.istft import IstftHeadConfig
from training.joe.shards import Utterance, shard_path, write_shard
from training.joe.spectral_loss import WaveformDistillationLoss
from training.joe.train_decoder import DecoderTrainConfig, DecoderTrainer


def test_distillation_loss_is_zero_only_at_the_target():
    loss = WaveformDistillationLoss(22050)
    target = torch.randn(2, 4096) * 0.1
    assert float(loss(target, target)) < 1e-5
    assert float(loss(target * 0.5, target)) > 0.1


def synthetic_latents(tmp_path) -> None:
    rng = np.random.default_rng(0)
    utterances = []
    for index in range(12):
        frames = int(rng.integers(24, 40))
        latent = (rng.normal(size=(frames, 192)) * 0.8).astype(np.float16)
        utterances.append(Utterance(f"u{index}", "synthetic", 1.0, np.ones(1, np.int16),
                                    np.array([frames], np.int16), latent, latent))
    write_shard(shard_path(tmp_path, 0), utterances)


SMALL = IstftHeadConfig(channels=16)


def schedule(steps: int) -> DecoderTrainConfig:
    return DecoderTrainConfig(every=2, holdout_every=4, valid_utterances=1, steps=steps, batch=2, crop_frames=16,
                              margin=4, warmup_steps=2, eval_every=1000, seed=5)


def test_decoder_training_learns_and_resumes_exactly(tmp_path):
    synthetic_latents(tmp_path / "data")
    straight = DecoderTrainer(schedule(8), SMALL, tmp_path / "data", tmp_path / "straight", threads=1)
    before = straight.validate()["valid_loss"]
    straight.train()
    assert straight.validate()["valid_loss"] < before

    interrupted = DecoderTrainer(schedule(8), SMALL, tmp_path / "data", tmp_path / "resumed", threads=1)
    interrupted.train(stop_at=3)
    resumed = DecoderTrainer(schedule(8), SMALL, tmp_path / "data", tmp_path / "resumed", threads=1)
    assert resumed.try_resume() and resumed.step == 3
    resumed.train()
    for name, value in straight.decoder.head.state_dict().items():
        torch.testing.assert_close(resumed.decoder.head.state_dict()[name], value, rtol=0, atol=0)


def test_student_share_decodes_the_students_predictions_against_the_teachers_audio(tmp_path):
    synthetic_latents(tmp_path / "data")
    config = DecoderTrainConfig(every=2, holdout_every=4, valid_utterances=1, steps=2, batch=4,
                                crop_frames=16, margin=4, warmup_steps=1, eval_every=1000, student_share=0.5)
    trainer = DecoderTrainer(config, SMALL, tmp_path / "data", tmp_path / "out", threads=1)
    teacher_set, student_set = trainer.sets["train"], trainer.sets["student-train"]
    np.testing.assert_array_equal(student_set.audio, teacher_set.audio)  # the target stays the teacher's
    np.testing.assert_array_equal(student_set.offsets, teacher_set.offsets)
    assert not np.array_equal(student_set.features, teacher_set.features)  # but the input is the student's
    feats, audio = trainer._batch(np.random.default_rng(0))
    assert feats.shape[0] == audio.shape[0] == 4
    trainer.train()
    assert {"valid_loss", "student_valid_loss"} <= set(trainer.validate())
