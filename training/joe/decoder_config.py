"""The decoder head's training settings (`DecoderTrainConfig`): what the data selection
(decoder_data.py) and the trainer (train_decoder.py) both read."""
from __future__ import annotations

from dataclasses import dataclass

from training.joe.lr_schedule import warmup_cosine


@dataclass(frozen=True, slots=True)
class DecoderTrainConfig:
    """`every`-th utterance of the teacher data trains, the first `valid_utterances` of every
    `holdout_every`-th validate (the student's held-out set; they never train);
    a step is `batch` crops of `crop_frames` frames, the loss skipping `margin` head positions at
    each crop edge (the head sees zero padding there, never in the engine's windows)."""

    every: int = 8
    student_share: float = 0.0
    holdout_every: int = 100
    valid_utterances: int = 40
    steps: int = 10000
    batch: int = 16
    crop_frames: int = 32
    margin: int = 12
    learning_rate: float = 2e-3
    warmup_steps: int = 100
    final_lr_fraction: float = 0.05
    seed: int = 0
    checkpoint_minutes: float = 5.0
    eval_every: int = 250

    def lr_at(self, step: int) -> float:
        return warmup_cosine(step, self.learning_rate, self.warmup_steps, self.steps, self.final_lr_fraction)
