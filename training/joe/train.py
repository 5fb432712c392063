"""Trains the joe student on the teacher data, in one command (seeded, resumable, progress bar):

    python -m training.joe.train                    # --minutes, --steps, --out, --data

Teacher forcing with an L1 loss on standardized z. A checkpoint (model, optimizer, step, data
position) is written every few minutes and at the end; a rerun with the same --out resumes from
it and, being seeded per epoch and per step, continues as if never stopped. At the end the
weights are exported as float16 with a manifest (data, steps, losses, sha256): pass
--export model/families/joe/weights to update the shipped voice.
"""
from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterator

import torch

from model.families.joe.student import WEIGHTS_FILE, JoeStudent, StudentConfig
from model.paths import voice_cache
from training.command import add_run_arguments, parse_run_arguments, resume_train_export
from training.joe.dataset import Split, bucketed_batches, channel_statistics, iterate_batches, load_splits
from training.joe.dense import StudentBatch, forward_steps, masked_l1
from training.joe.lr_schedule import warmup_cosine
from training.trainer import Trainer


@dataclass(frozen=True, slots=True)
class TrainConfig:
    """Optimisation settings; `steps` fixes the learning-rate schedule, `minutes` may stop earlier."""

    steps: int = 2300
    minutes: float = 120.0
    max_tokens: int = 4096
    learning_rate: float = 1e-3
    warmup_steps: int = 300
    final_lr_fraction: float = 0.05
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    seed: int = 0
    checkpoint_minutes: float = 5.0
    eval_every: int = 250

    def lr_at(self, step: int) -> float:
        return warmup_cosine(step, self.learning_rate, self.warmup_steps, self.steps, self.final_lr_fraction)


@torch.no_grad()
def validation_loss(student: JoeStudent, split: Split, max_tokens: int) -> float:
    student.eval()
    total, weight = 0.0, 0.0
    for batch in iterate_batches(student, split, max_tokens, seed=0):
        frames = float(batch.target_mask.sum())
        total += float(masked_l1(forward_steps(student, batch), batch)) * frames
        weight += frames
    student.train()
    return total / max(weight, 1.0)


class StudentTrainer(Trainer):
    """Trains the student by teacher forcing, epoch after epoch of length-bucketed batches.
    Invariant: at every checkpoint, (epoch, batch_in_epoch) name exactly the batches trained on,
    so a resume skips precisely those."""

    description = "joe student (model/families/joe/student.py)"
    weights_dtype = "float16 (channel statistics float32)"

    def __init__(self, config: TrainConfig, model_config: StudentConfig, data: Path, out: Path,
                 limit: int | None = None, device: str = "cpu") -> None:
        super().__init__(config, out, config.grad_clip, device)
        self.data = data
        self.train_split, self.valid_split = load_splits(data, model_config.frames_per_step, limit=limit)
        self.student = JoeStudent(model_config)
        self._set_statistics()
        # Batches are built on the CPU; forward_steps moves them to the model's device.
        self.student.to(device)
        decay = [p for n, p in self.student.named_parameters() if p.dim() >= 2]
        rest = [p for n, p in self.student.named_parameters() if p.dim() < 2]
        self.optimizer = torch.optim.AdamW(
            [{"params": decay, "weight_decay": config.weight_decay}, {"params": rest, "weight_decay": 0.0}],
            lr=config.learning_rate, betas=(0.9, 0.98),
        )
        self.epoch, self.batch_in_epoch = 0, 0

    @property
    def module(self) -> JoeStudent:
        return self.student

    def _set_statistics(self) -> None:
        sample = self.train_split.utterances[:2000]
        for field in ("prior", "latent"):
            mean, std = channel_statistics(sample, field)
            getattr(self.student, f"{field}_mean").copy_(mean)
            getattr(self.student, f"{field}_std").copy_(std)

    def _batches(self) -> Iterator[StudentBatch]:
        cfg = self.config
        while True:
            seed = cfg.seed * 1_000_003 + self.epoch
            for batch in iterate_batches(self.student, self.train_split, cfg.max_tokens, seed, self.batch_in_epoch):
                self.batch_in_epoch += 1
                yield batch
            self.epoch += 1
            self.batch_in_epoch = 0

    def _loss(self, batch: StudentBatch) -> torch.Tensor:
        return masked_l1(forward_steps(self.student, batch), batch)

    def _evaluate(self, train_loss: float) -> dict:
        valid = validation_loss(self.student, self.valid_split, self.config.max_tokens)
        return {"train_l1": round(train_loss, 5), "valid_l1": round(valid, 5)}

    def position(self) -> dict:
        return {"epoch": self.epoch}

    def _time_budget_seconds(self) -> float:
        return self.config.minutes * 60

    def _model_state(self) -> dict:
        return {"model": self.student.state_dict(), "epoch": self.epoch, "batch_in_epoch": self.batch_in_epoch,
                "student_config": asdict(self.student.config)}

    def _restore(self, state: dict) -> None:
        self.student.load_state_dict(state["model"])
        self.epoch, self.batch_in_epoch = state["epoch"], state["batch_in_epoch"]

    def _save_weights(self, folder: Path) -> Path:
        self.student.save(folder)
        return folder / WEIGHTS_FILE

    def _data_summary(self) -> dict:
        frames = sum(u.num_frames for u in self.train_split.utterances)
        settings = json.loads((self.data / "manifest.json").read_text()) if (self.data / "manifest.json").is_file() else {}
        return {"folder": "teacher data of python -m training.joe.make_data",
                "settings": settings.get("settings", settings),
                "train_utterances": len(self.train_split.utterances),
                "valid_utterances": len(self.valid_split.utterances),
                "train_hours": round(frames * 256 / 22050 / 3600, 2)}

    def _manifest_extras(self) -> dict:
        batches_per_epoch = len(bucketed_batches(self.train_split.lengths, self.config.max_tokens, 0))
        return {"epochs_done": round(self.epoch + self.batch_in_epoch / max(1, batches_per_epoch), 3)}

    def _machine(self) -> dict:
        return {"device": self.device, **super()._machine()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    defaults = TrainConfig()
    add_run_arguments(parser, defaults, data=voice_cache("joe") / "data", out=voice_cache("joe") / "train",
                      export_help="folder for the float16 weights + manifest")
    parser.add_argument("--minutes", type=float, default=defaults.minutes)
    parser.add_argument("--max-tokens", type=int, default=defaults.max_tokens)
    parser.add_argument("--frames-per-step", type=int, default=StudentConfig().frames_per_step)
    parser.add_argument("--limit", type=int, default=None, help="use only the first N utterances")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--export-only", action="store_true", help="export the checkpoint in --out, do not train")
    args = parse_run_arguments(parser, argv)
    config = TrainConfig(steps=args.steps, minutes=args.minutes, max_tokens=args.max_tokens,
                         learning_rate=args.lr, warmup_steps=args.warmup, seed=args.seed)
    trainer = StudentTrainer(config, StudentConfig(frames_per_step=args.frames_per_step), args.data, args.out,
                             args.limit, args.device)
    folder, manifest = resume_train_export(trainer, args.export, args.note, export_only=args.export_only)
    print(f"exported {manifest['weights_bytes'] / 1e6:.1f} MB to {folder}")


if __name__ == "__main__":
    main()
