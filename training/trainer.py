"""The skeleton every training command shares: a seeded step loop with a progress bar and
periodic validation, a checkpoint written atomically every few minutes and at the end, a resume
that continues bit for bit, and an export of the weights with a manifest of how they were made.

A command subclasses `Trainer` with what is its own (model, batches, loss, validation metrics,
export format) and runs it with `training.command`.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import time
from abc import ABC, abstractmethod
from dataclasses import asdict
from pathlib import Path
from typing import Any, Iterator, Protocol

import torch
from tqdm import tqdm

CHECKPOINT = "checkpoint.pt"


class Schedule(Protocol):
    """What the loop reads of a command's settings (a dataclass, saved with every checkpoint).
    Invariant: `lr_at` depends on the step alone, so a resumed run sets the rates an
    uninterrupted one would."""

    steps: int
    seed: int
    eval_every: int
    checkpoint_minutes: float

    def lr_at(self, step: int) -> float: ...


class Trainer(ABC):
    """One training run, checkpointed in `out`. Invariant: a step depends only on the seed and on
    what the checkpoint holds (weights, optimizer, step, data position), so a run resumed from its
    checkpoint takes bit for bit the steps an uninterrupted one would.

    A subclass calls this constructor first (the seed then fixes its model's initial weights),
    then builds its model and sets `optimizer`; it supplies the rest through the methods below.
    """

    manifest_name = "manifest.json"
    weights_dtype = "float16"
    description: str  # the manifest's "model": what was trained, and where its code is
    optimizer: torch.optim.Optimizer

    def __init__(self, config: Schedule, out: Path, grad_clip: float, device: str = "cpu") -> None:
        self.config, self.out, self.grad_clip, self.device = config, out, grad_clip, device
        torch.manual_seed(config.seed)
        self.step = 0
        self.history: list[dict] = []
        self.elapsed_seconds = 0.0  # training wall time over every session of this run
        self.checkpoint_config: Schedule | None = None  # the settings the resumed checkpoint ran with

    @property
    @abstractmethod
    def module(self) -> torch.nn.Module:
        """What is trained and exported."""

    @abstractmethod
    def _batches(self) -> Iterator[Any]:
        """Training batches from the current data position on, without end; drawing one moves the
        position past it."""

    @abstractmethod
    def _loss(self, batch: Any) -> torch.Tensor:
        """The loss of one batch, differentiable with respect to the module's parameters."""

    @abstractmethod
    def _evaluate(self, train_loss: float) -> dict:
        """The metrics of a history record: the last step's loss and the validation's."""

    @abstractmethod
    def _model_state(self) -> dict:
        """The checkpoint's own entries: the model's weights and shape, and the data position."""

    @abstractmethod
    def _restore(self, state: dict) -> None:
        """Loads back what `_model_state` saved."""

    @abstractmethod
    def _save_weights(self, folder: Path) -> Path:
        """Writes the exported weights (and their config) to `folder`; returns the weights file."""

    @abstractmethod
    def _data_summary(self) -> dict:
        """The manifest's "data": what the run trained and validated on."""

    def position(self) -> dict:
        """Where the data stands beyond the step count (shown beside the loss, kept in the history)."""
        return {}

    def _manifest_extras(self) -> dict:
        """Fields of the manifest, after its settings, that only this kind of run has."""
        return {}

    def _time_budget_seconds(self) -> float:
        """Wall time after which the run stops before the end of its schedule."""
        return math.inf

    def _machine(self) -> dict:
        """The manifest's "trained_on"."""
        return {"torch_threads": torch.get_num_threads(), "cpu": platform.processor() or platform.machine(),
                "cpu_count": os.cpu_count(), "torch": torch.__version__,
                "wall_minutes": round(self.elapsed_seconds / 60, 1)}

    def train(self, stop_at: int | None = None) -> None:
        """Trains to the schedule's last step (or until the time budget is spent, or after step
        `stop_at`: an interruption, as a killed run would be, that a later call resumes from the
        checkpoint)."""
        cfg = self.config
        last_step = cfg.steps if stop_at is None else min(stop_at, cfg.steps)
        mark = last_checkpoint = time.monotonic()
        self.module.train()
        bar = tqdm(total=cfg.steps, initial=self.step, unit="step", dynamic_ncols=True)
        batches = self._batches()
        while self.step < last_step:
            loss = self._optimizer_step(next(batches))
            self.step += 1
            bar.update(1)
            bar.set_postfix(loss=f"{loss:.4f}", **self.position(), lr=f"{cfg.lr_at(self.step):.2e}")
            if self.step % cfg.eval_every == 0 or self.step == cfg.steps:
                record = {"step": self.step, **self._evaluate(loss), **self.position()}
                record["minutes"] = round((self.elapsed_seconds + time.monotonic() - mark) / 60, 2)
                self.history.append(record)
                tqdm.write(json.dumps(record))
            now = time.monotonic()
            # Wall time accumulates across resumed sessions, so the time budget bounds the whole run.
            self.elapsed_seconds += now - mark
            mark = now
            if now - last_checkpoint > cfg.checkpoint_minutes * 60:
                self.save_checkpoint()
                last_checkpoint = now
            if self.elapsed_seconds > self._time_budget_seconds():
                break
        bar.close()
        self.save_checkpoint()

    def _optimizer_step(self, batch: Any) -> float:
        for group in self.optimizer.param_groups:
            group["lr"] = self.config.lr_at(self.step)
        # Randomness in the forward pass (dropout) draws from a per-step seed, so that a resumed
        # run repeats the masks an uninterrupted one would have drawn.
        torch.manual_seed(self.config.seed * 7919 + self.step)
        loss = self._loss(batch)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.module.parameters(), self.grad_clip)
        self.optimizer.step()
        return float(loss.detach())

    def save_checkpoint(self) -> None:
        """Written aside and renamed: a run killed while writing keeps its previous checkpoint."""
        self.out.mkdir(parents=True, exist_ok=True)
        state = {**self._model_state(), "optimizer": self.optimizer.state_dict(), "step": self.step,
                 "history": self.history, "config": asdict(self.config), "elapsed_seconds": self.elapsed_seconds}
        staging = self.out / (CHECKPOINT + ".tmp")
        torch.save(state, staging)
        staging.replace(self.out / CHECKPOINT)

    def try_resume(self) -> bool:
        """Loads the checkpoint in `out`, if there is one."""
        path = self.out / CHECKPOINT
        if not path.is_file():
            return False
        state = torch.load(path, weights_only=False, map_location=self.device)
        self._restore(state)
        self.optimizer.load_state_dict(state["optimizer"])
        self.step, self.history = state["step"], state["history"]
        self.elapsed_seconds = state.get("elapsed_seconds", 0.0)
        self.checkpoint_config = type(self.config)(**state["config"])
        return True

    def export(self, folder: Path, note: str | None = None) -> dict:
        """The weights and, beside them, a manifest: data, settings, steps, machine, losses and
        the weights' sha256."""
        self.module.eval()
        weights = self._save_weights(folder)
        manifest = {
            "model": self.description,
            "parameters": sum(p.numel() for p in self.module.parameters()),
            "weights_file": weights.name,
            "weights_bytes": weights.stat().st_size,
            "weights_dtype": self.weights_dtype,
            "sha256": hashlib.sha256(weights.read_bytes()).hexdigest(),
            "data": self._data_summary(),
            "train": asdict(self.config),
            **self._manifest_extras(),
            "steps_done": self.step,
            "trained_on": self._machine(),
            "history": self.history,
        }
        if note:
            manifest["note"] = note
        (folder / self.manifest_name).write_text(json.dumps(manifest, indent=2) + "\n")
        return manifest
