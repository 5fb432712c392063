"""The command line every training command shares: where its data and its run folder are, the
schedule's length, peak rate, warm-up and seed, torch's threads and a note for the manifest;
then resume, train and export."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import torch

from training.trainer import Trainer


def add_run_arguments(parser: argparse.ArgumentParser, defaults: Any, data: Path, out: Path,
                      export_help: str) -> None:
    """`defaults`: the command's default settings (steps, learning_rate, warmup_steps, seed)."""
    parser.add_argument("--data", type=Path, default=data)
    parser.add_argument("--out", type=Path, default=out)
    parser.add_argument("--export", type=Path, default=None, help=export_help)
    parser.add_argument("--steps", type=int, default=defaults.steps)
    parser.add_argument("--lr", type=float, default=defaults.learning_rate)
    parser.add_argument("--warmup", type=int, default=defaults.warmup_steps)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: all cores)")
    parser.add_argument("--note", default=None, help="a sentence for the manifest (how this run was done)")


def parse_run_arguments(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """Parses, and sets torch's threads before the trainer builds anything."""
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    return args


def resume_train_export(trainer: Trainer, export: Path | None, note: str | None,
                        export_only: bool = False) -> tuple[Path, dict]:
    """Resumes from the checkpoint in the run's folder if there is one, trains to the end of the
    schedule (unless `export_only`) and exports to `export` (default: the run's export/).
    Returns that folder and the manifest."""
    if trainer.try_resume():
        position = ", ".join(f"{name} {value}" for name, value in trainer.position().items())
        print(f"resumed at step {trainer.step}" + (f" ({position})" if position else ""))
    elif export_only:
        raise SystemExit(f"no checkpoint in {trainer.out} to export")
    if export_only:
        # The manifest describes the run that wrote the checkpoint, not this command's defaults.
        trainer.config = trainer.checkpoint_config
    else:
        trainer.train()
    folder = export or trainer.out / "export"
    return folder, trainer.export(folder, note)
