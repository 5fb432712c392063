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
import hashlib
import json
import os
import platform
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from tqdm import tqdm

from model.families.joe.student import WEIGHTS_FILE, JoeStudent, StudentConfig
from model.paths import voice_cache
from training.joe.dataset import Split, bucketed_batches, channel_statistics, iterate_batches, load_splits
from training.joe.dense import forward_steps, masked_l1
from training.joe.lr_schedule import warmup_cosine

CHECKPOINT = "checkpoint.pt"


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


class Trainer:
    """Owns the model, optimizer and data position. Invariant: (epoch, batch_in_epoch, step)
    identify exactly which batches have been trained on, so a resume skips precisely those."""

    def __init__(self, config: TrainConfig, model_config: StudentConfig, data: Path, out: Path,
                 limit: int | None = None, device: str = "cpu") -> None:
        self.config, self.out = config, out
        torch.manual_seed(config.seed)
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
        self.step, self.epoch, self.batch_in_epoch = 0, 0, 0
        self.history: list[dict] = []
        self.elapsed_seconds = 0.0  # training wall time over every session of this run
        self.checkpoint_config: TrainConfig | None = None  # the settings the resumed checkpoint ran with
        self.device = device
        self.data = data

    def _set_statistics(self) -> None:
        sample = self.train_split.utterances[:2000]
        for field in ("prior", "latent"):
            mean, std = channel_statistics(sample, field)
            getattr(self.student, f"{field}_mean").copy_(mean)
            getattr(self.student, f"{field}_std").copy_(std)

    def save_checkpoint(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        state = {"model": self.student.state_dict(), "optimizer": self.optimizer.state_dict(),
                 "step": self.step, "epoch": self.epoch, "batch_in_epoch": self.batch_in_epoch,
                 "history": self.history, "config": asdict(self.config),
                 "student_config": asdict(self.student.config), "elapsed_seconds": self.elapsed_seconds}
        staging = self.out / (CHECKPOINT + ".tmp")
        torch.save(state, staging)
        staging.replace(self.out / CHECKPOINT)

    def try_resume(self) -> bool:
        path = self.out / CHECKPOINT
        if not path.is_file():
            return False
        state = torch.load(path, weights_only=False, map_location=self.student.prior_mean.device)
        self.student.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.step, self.epoch, self.batch_in_epoch = state["step"], state["epoch"], state["batch_in_epoch"]
        self.history = state["history"]
        self.elapsed_seconds = state.get("elapsed_seconds", 0.0)
        self.checkpoint_config = TrainConfig(**state["config"])
        return True

    def train(self, stop_at: int | None = None) -> None:
        """Trains to `steps` (or until `minutes` pass, or after step `stop_at`: an interruption,
        as a killed run would be, that a later call resumes from the checkpoint)."""
        cfg = self.config
        last_step = cfg.steps if stop_at is None else min(stop_at, cfg.steps)
        mark = last_checkpoint = time.monotonic()
        self.student.train()
        bar = tqdm(total=cfg.steps, initial=self.step, unit="step", dynamic_ncols=True)
        while self.step < last_step:
            seed = cfg.seed * 1_000_003 + self.epoch
            for batch in iterate_batches(self.student, self.train_split, cfg.max_tokens, seed, self.batch_in_epoch):
                loss = self._train_step(batch)
                self.step += 1
                self.batch_in_epoch += 1
                bar.update(1)
                bar.set_postfix(loss=f"{loss:.4f}", epoch=self.epoch, lr=f"{cfg.lr_at(self.step):.2e}")
                if self.step % cfg.eval_every == 0 or self.step == cfg.steps:
                    valid = validation_loss(self.student, self.valid_split, cfg.max_tokens)
                    minutes = (self.elapsed_seconds + time.monotonic() - mark) / 60
                    self.history.append({"step": self.step, "train_l1": round(loss, 5), "valid_l1": round(valid, 5),
                                         "epoch": self.epoch, "minutes": round(minutes, 2)})
                    tqdm.write(json.dumps(self.history[-1]))
                now = time.monotonic()
                # Wall time accumulates across resumed sessions; `minutes` bounds the whole run.
                self.elapsed_seconds += now - mark
                mark = now
                if now - last_checkpoint > cfg.checkpoint_minutes * 60:
                    self.save_checkpoint()
                    last_checkpoint = now
                if self.step >= last_step or self.elapsed_seconds > cfg.minutes * 60:
                    break
            else:
                self.epoch += 1
                self.batch_in_epoch = 0
                continue
            break
        bar.close()
        self.save_checkpoint()

    def _train_step(self, batch) -> float:
        cfg = self.config
        for group in self.optimizer.param_groups:
            group["lr"] = cfg.lr_at(self.step)
        # Dropout draws from a per-step seed so that a resumed run repeats the same masks.
        torch.manual_seed(cfg.seed * 7919 + self.step)
        loss = masked_l1(forward_steps(self.student, batch), batch)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.student.parameters(), cfg.grad_clip)
        self.optimizer.step()
        return float(loss.detach())

    def export(self, folder: Path, note: str | None = None) -> dict:
        self.student.eval()
        self.student.save(folder)
        weights = folder / WEIGHTS_FILE
        manifest = {
            "model": "joe student (model/families/joe/student.py)",
            "parameters": sum(p.numel() for p in self.student.parameters()),
            "weights_file": WEIGHTS_FILE,
            "weights_bytes": weights.stat().st_size,
            "weights_dtype": "float16 (channel statistics float32)",
            "sha256": hashlib.sha256(weights.read_bytes()).hexdigest(),
            "data": self._data_summary(),
            "train": asdict(self.config),
            "steps_done": self.step,
            "trained_on": {"device": self.device, "torch_threads": torch.get_num_threads(),
                           "cpu": platform.processor() or platform.machine(), "cpu_count": os.cpu_count(),
                           "torch": torch.__version__, "wall_minutes": round(self.elapsed_seconds / 60, 1)},
            "epochs_done": round(self.epoch + self.batch_in_epoch / max(1, self._batches_per_epoch()), 3),
            "history": self.history,
        }
        if note:
            manifest["note"] = note
        (folder / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
        return manifest

    def _batches_per_epoch(self) -> int:
        return len(bucketed_batches(self.train_split.lengths, self.config.max_tokens, 0))

    def _data_summary(self) -> dict:
        frames = sum(u.num_frames for u in self.train_split.utterances)
        settings = json.loads((self.data / "manifest.json").read_text()) if (self.data / "manifest.json").is_file() else {}
        return {"folder": "teacher data of python -m training.joe.make_data",
                "settings": settings.get("settings", settings),
                "train_utterances": len(self.train_split.utterances),
                "valid_utterances": len(self.valid_split.utterances),
                "train_hours": round(frames * 256 / 22050 / 3600, 2)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    defaults = TrainConfig()
    parser.add_argument("--data", type=Path, default=voice_cache("joe") / "data")
    parser.add_argument("--out", type=Path, default=voice_cache("joe") / "train")
    parser.add_argument("--export", type=Path, default=None, help="folder for the float16 weights + manifest")
    parser.add_argument("--steps", type=int, default=defaults.steps)
    parser.add_argument("--minutes", type=float, default=defaults.minutes)
    parser.add_argument("--max-tokens", type=int, default=defaults.max_tokens)
    parser.add_argument("--lr", type=float, default=defaults.learning_rate)
    parser.add_argument("--warmup", type=int, default=defaults.warmup_steps)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--frames-per-step", type=int, default=StudentConfig().frames_per_step)
    parser.add_argument("--limit", type=int, default=None, help="use only the first N utterances")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: all cores)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--export-only", action="store_true", help="export the checkpoint in --out, do not train")
    parser.add_argument("--note", default=None, help="a sentence for the manifest (how this run was done)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    config = TrainConfig(steps=args.steps, minutes=args.minutes, max_tokens=args.max_tokens,
                         learning_rate=args.lr, warmup_steps=args.warmup, seed=args.seed)
    trainer = Trainer(config, StudentConfig(frames_per_step=args.frames_per_step), args.data, args.out, args.limit,
                      args.device)
    if trainer.try_resume():
        print(f"resumed at step {trainer.step} (epoch {trainer.epoch})")
    elif args.export_only:
        raise SystemExit(f"no checkpoint in {args.out} to export")
    if args.export_only:
        # The manifest describes the run that wrote the checkpoint, not this command's defaults.
        trainer.config = trainer.checkpoint_config
    else:
        trainer.train()
    export = args.export or args.out / "export"
    manifest = trainer.export(export, args.note)
    print(f"exported {manifest['weights_bytes'] / 1e6:.1f} MB to {export}")


if __name__ == "__main__":
    main()
