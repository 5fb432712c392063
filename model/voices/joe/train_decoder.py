"""Trains the joe voice's iSTFT decoder head against the teacher HiFi-GAN, in one command:

    python -m model.voices.joe.train_decoder --export model/voices/joe/weights

Seeded, resumable (a checkpoint every few minutes; a rerun with the same --out continues as if
never stopped) and with a progress bar. The first run decodes a subset of the teacher data once
(z → the frozen HiFi-GAN trunk's features, and z → the teacher's waveform) into a cache; every
step then trains the head on random crops of those, against the teacher's own samples.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from model.tiny_random import cache_root
from model.voices.joe.hifigan import HifiGanDecoder
from model.voices.joe.istft import HEAD_WEIGHTS_FILE, IstftDecoder, IstftHeadConfig, save_head
from model.voices.joe.shards import iter_utterances
from model.voices.joe.spectral_loss import WaveformDistillationLoss, snr_db
from model.voices.joe.teacher import AUDIO, DECODER_CUT, LATENT, decoder_state_dict, open_session

CHECKPOINT = "checkpoint.pt"
MANIFEST = "decoder_manifest.json"


@dataclass(frozen=True, slots=True)
class DecoderTrainConfig:
    """`every`-th utterance of the teacher data trains, the first `valid_utterances` of every
    `holdout_every`-th validate (the student's held-out set; they never train);
    a step is `batch` crops of `crop_frames` frames, the loss skipping `margin` head positions at
    each crop edge (the head sees zero padding there, never in the engine's windows)."""

    every: int = 8
    holdout_every: int = 100
    valid_utterances: int = 40
    steps: int = 2000
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
        if step < self.warmup_steps:
            return self.learning_rate * (step + 1) / self.warmup_steps
        progress = min(1.0, (step - self.warmup_steps) / max(1, self.steps - self.warmup_steps))
        floor = self.final_lr_fraction
        return self.learning_rate * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress)))


class DecodedSubset:
    """Trunk features (float16, position-major [positions, C]) and teacher audio (float32) of a
    set of utterances. Invariant: utterance i owns frames offsets[i]..offsets[i + 1], i.e.
    positions 8x and samples 256x those."""

    def __init__(self, features: np.ndarray, audio: np.ndarray, offsets: np.ndarray) -> None:
        self.features, self.audio, self.offsets = features, audio, offsets

    @classmethod
    def build(cls, decoder: IstftDecoder, latents: list[np.ndarray], threads: int) -> DecodedSubset:
        teacher = open_session(DECODER_CUT, threads)
        features, audio = [], []
        for latent in tqdm(latents, desc="teacher decode", unit="utt", dynamic_ncols=True):
            z = np.ascontiguousarray(latent.astype(np.float32).T[None])
            (wave,) = teacher.run([AUDIO], {LATENT: z})
            with torch.inference_mode():
                feats = decoder.trunk(torch.from_numpy(z))[0]
            features.append(feats.T.to(torch.float16).numpy())
            audio.append(wave.reshape(-1).astype(np.float32))
        offsets = np.concatenate([[0], np.cumsum([len(l) for l in latents])]).astype(np.int64)
        return cls(np.concatenate(features), np.concatenate(audio), offsets)

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        staging = path.with_suffix(".tmp.npz")
        np.savez(staging, features=self.features, audio=self.audio, offsets=self.offsets)
        staging.replace(path)

    @classmethod
    def load(cls, path: Path) -> DecodedSubset:
        with np.load(path) as data:
            return cls(data["features"], data["audio"], data["offsets"])

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def utterance(self, index: int, positions_per_frame: int, hop: int) -> tuple[torch.Tensor, torch.Tensor]:
        start, end = self.offsets[index], self.offsets[index + 1]
        feats = torch.from_numpy(self.features[start * positions_per_frame : end * positions_per_frame])
        return feats.float().T[None], torch.from_numpy(self.audio[start * hop : end * hop])[None]

    def crops(self, generator: np.random.Generator, count: int, frames: int, positions_per_frame: int,
              hop: int) -> tuple[torch.Tensor, torch.Tensor]:
        lengths = np.diff(self.offsets)
        eligible = np.flatnonzero(lengths >= frames)
        weights = lengths[eligible] / lengths[eligible].sum()
        feats, audio = [], []
        for index in generator.choice(eligible, size=count, p=weights):
            first = self.offsets[index] + generator.integers(0, lengths[index] - frames + 1)
            feats.append(self.features[first * positions_per_frame : (first + frames) * positions_per_frame])
            audio.append(self.audio[first * hop : (first + frames) * hop])
        return torch.from_numpy(np.stack(feats)).float().transpose(1, 2), torch.from_numpy(np.stack(audio))


def select_latents(data: Path, config: DecoderTrainConfig) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(train, validation) latents."""
    train, valid = [], []
    for index, utterance in enumerate(iter_utterances(data)):
        if index % config.holdout_every == config.holdout_every - 1:
            if len(valid) < config.valid_utterances:
                valid.append(utterance.latent)
        elif index % config.every == 0:
            train.append(utterance.latent)
    if not train or not valid:
        raise FileNotFoundError(f"too little teacher data in {data}: run python -m model.voices.joe.make_data")
    return train, valid


class DecoderTrainer:
    """Owns the head, optimizer and step. Invariant: step s trains on the crops drawn from
    seed (seed, s), so a resumed run sees exactly the batches an uninterrupted one would."""

    def __init__(self, config: DecoderTrainConfig, head_config: IstftHeadConfig, data: Path, out: Path,
                 threads: int) -> None:
        self.config, self.out, self.data = config, out, data
        torch.manual_seed(config.seed)
        teacher = HifiGanDecoder.from_state_dict(decoder_state_dict())
        self.decoder = IstftDecoder.build(teacher, head_config)
        self.positions = self.decoder.trunk.positions_per_frame
        self.hop = teacher.config.hop_length
        self.loss = WaveformDistillationLoss(teacher.config.sample_rate)
        self.optimizer = torch.optim.AdamW(self.decoder.head.parameters(), lr=config.learning_rate,
                                           betas=(0.8, 0.99), weight_decay=0.0)
        self.step, self.history, self.elapsed_seconds = 0, [], 0.0
        self.train_set, self.valid_set = self._subsets(threads)

    def _subsets(self, threads: int) -> tuple[DecodedSubset, DecodedSubset]:
        cfg = self.config
        cache = self.out / f"decoded-every{cfg.every}-holdout{cfg.holdout_every}-valid{cfg.valid_utterances}"
        if (cache / "valid.npz").is_file():
            return DecodedSubset.load(cache / "train.npz"), DecodedSubset.load(cache / "valid.npz")
        train, valid = select_latents(self.data, self.config)
        subsets = tuple(DecodedSubset.build(self.decoder, latents, threads) for latents in (train, valid))
        for subset, name in zip(subsets, ("train", "valid")):
            subset.save(cache / f"{name}.npz")
        return subsets

    def save_checkpoint(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        state = {"head": self.decoder.head.state_dict(), "optimizer": self.optimizer.state_dict(),
                 "step": self.step, "history": self.history, "config": asdict(self.config),
                 "head_config": self.decoder.head.config.to_dict(), "elapsed_seconds": self.elapsed_seconds}
        torch.save(state, self.out / (CHECKPOINT + ".tmp"))
        (self.out / (CHECKPOINT + ".tmp")).replace(self.out / CHECKPOINT)

    def try_resume(self) -> bool:
        path = self.out / CHECKPOINT
        if not path.is_file():
            return False
        state = torch.load(path, weights_only=False)
        self.decoder.head.load_state_dict(state["head"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.step, self.history = state["step"], state["history"]
        self.elapsed_seconds = state["elapsed_seconds"]
        return True

    @torch.no_grad()
    def validate(self) -> dict:
        self.decoder.head.eval()
        losses, snrs = [], []
        for index in range(len(self.valid_set)):
            feats, target = self.valid_set.utterance(index, self.positions, self.hop)
            pred = self.decoder.head(feats)
            losses.append(float(self.loss(pred, target)))
            snrs.append(snr_db(pred, target))
        self.decoder.head.train()
        return {"valid_loss": round(float(np.mean(losses)), 4), "valid_snr_db": round(float(np.mean(snrs)), 2)}

    def train(self, stop_at: int | None = None) -> None:
        cfg = self.config
        last_step = cfg.steps if stop_at is None else min(stop_at, cfg.steps)
        mark = last_checkpoint = time.monotonic()
        edge = cfg.margin * self.hop // self.positions
        bar = tqdm(total=cfg.steps, initial=self.step, unit="step", dynamic_ncols=True)
        self.decoder.head.train()
        while self.step < last_step:
            generator = np.random.default_rng([cfg.seed, self.step])
            feats, target = self.train_set.crops(generator, cfg.batch, cfg.crop_frames, self.positions, self.hop)
            for group in self.optimizer.param_groups:
                group["lr"] = cfg.lr_at(self.step)
            pred = self.decoder.head(feats)
            loss = self.loss(pred[:, edge:-edge], target[:, edge:-edge])
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.decoder.head.parameters(), 10.0)
            self.optimizer.step()
            self.step += 1
            loss = float(loss.detach())
            bar.update(1)
            bar.set_postfix(loss=f"{loss:.4f}", lr=f"{cfg.lr_at(self.step):.2e}")
            now = time.monotonic()
            self.elapsed_seconds += now - mark
            mark = now
            if self.step % cfg.eval_every == 0 or self.step == cfg.steps:
                record = {"step": self.step, "train_loss": round(loss, 4), **self.validate(),
                          "minutes": round(self.elapsed_seconds / 60, 2)}
                self.history.append(record)
                tqdm.write(json.dumps(record))
                mark = time.monotonic()
            if now - last_checkpoint > cfg.checkpoint_minutes * 60:
                self.save_checkpoint()
                last_checkpoint = now
        bar.close()
        self.save_checkpoint()

    def export(self, folder: Path, note: str | None = None) -> dict:
        path = save_head(self.decoder.head, folder)
        frames = int(self.train_set.offsets[-1])
        manifest = {
            "model": "joe iSTFT decoder head (model/voices/joe/istft.py); its trunk is the voice's HiFi-GAN",
            "parameters": sum(p.numel() for p in self.decoder.head.parameters()),
            "weights_file": HEAD_WEIGHTS_FILE,
            "weights_bytes": path.stat().st_size,
            "weights_dtype": "float16",
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
            "data": {"folder": "teacher data of python -m model.voices.joe.make_data",
                     "train_utterances": len(self.train_set), "valid_utterances": len(self.valid_set),
                     "train_hours": round(frames * self.hop / 22050 / 3600, 2)},
            "train": asdict(self.config),
            "steps_done": self.step,
            "trained_on": {"torch_threads": torch.get_num_threads(), "cpu_count": os.cpu_count(),
                           "cpu": platform.processor() or platform.machine(), "torch": torch.__version__,
                           "wall_minutes": round(self.elapsed_seconds / 60, 1)},
            "history": self.history,
        }
        if note:
            manifest["note"] = note
        (folder / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        return manifest


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    defaults = DecoderTrainConfig()
    parser.add_argument("--data", type=Path, default=cache_root() / "voices" / "joe" / "data")
    parser.add_argument("--out", type=Path, default=cache_root() / "voices" / "joe" / "train-decoder")
    parser.add_argument("--export", type=Path, default=None, help="folder for the float16 head + manifest")
    parser.add_argument("--steps", type=int, default=defaults.steps)
    parser.add_argument("--every", type=int, default=defaults.every)
    parser.add_argument("--batch", type=int, default=defaults.batch)
    parser.add_argument("--lr", type=float, default=defaults.learning_rate)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: all cores)")
    parser.add_argument("--note", default=None, help="a sentence for the manifest (how this run was done)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    config = DecoderTrainConfig(steps=args.steps, every=args.every, batch=args.batch,
                                learning_rate=args.lr, seed=args.seed)
    trainer = DecoderTrainer(config, IstftHeadConfig(), args.data, args.out, torch.get_num_threads())
    if trainer.try_resume():
        print(f"resumed at step {trainer.step}")
    trainer.train()
    export = args.export or args.out / "export"
    manifest = trainer.export(export, args.note)
    print(f"exported {manifest['weights_bytes'] / 1e3:.0f} kB to {export}")


if __name__ == "__main__":
    main()
