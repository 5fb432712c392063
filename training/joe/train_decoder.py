"""Trains the joe voice's iSTFT decoder head against the teacher HiFi-GAN:

    python -m training.joe.train_decoder --export model/families/joe/weights
    python -m training.joe.train_decoder --init model/families/joe/weights --student-share 0.5 \
        --steps 4000 --lr 1e-3 --out <a new folder> --export model/families/joe/weights

(the two runs that made the shipped head: from scratch on teacher z, then fine-tuned on the
student's predictions; weights/decoder_manifest.json records both).

Seeded, resumable (a checkpoint every few minutes; a rerun with the same --out continues as if
never stopped) and with a progress bar. The first run decodes a subset of the teacher data once
(z → the frozen HiFi-GAN trunk's features, and z → the teacher's waveform) into a cache; every
step then trains the head on random crops of those, against the teacher's own samples.

With --student-share, that share of every batch decodes the student's predictions of z instead
(teacher-forced, like the "ground-truth aligned" fine-tuning of TTS vocoders) while the target
stays the teacher's waveform of the true z, so the head learns to be robust to the student's
errors. --init starts from a trained head (e.g. the shipped one) instead of from scratch.
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

import numpy as np
import torch
from tqdm import tqdm

from model.families.joe.hifigan import HifiGanDecoder
from model.families.joe.istft import HEAD_WEIGHTS_FILE, IstftDecoder, IstftHeadConfig, load_decoder, save_head
from model.families.joe.student import SHIPPED_WEIGHTS, WEIGHTS_FILE, JoeStudent
from model.families.joe.teacher import AUDIO, DECODER_CUT, LATENT, decoder_state_dict, open_session
from model.paths import voice_cache
from training.joe.dataset import make_batch
from training.joe.dense import forward_steps
from training.joe.lr_schedule import warmup_cosine
from training.joe.shards import Utterance, iter_utterances
from training.joe.spectral_loss import WaveformDistillationLoss, snr_db

CHECKPOINT = "checkpoint.pt"
MANIFEST = "decoder_manifest.json"


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


class DecodedSubset:
    """Trunk features (float16, position-major [positions, C]) and teacher audio (float32) of a
    set of utterances. Invariant: utterance i owns frames offsets[i]..offsets[i + 1], i.e.
    positions 8x and samples 256x those."""

    def __init__(self, features: np.ndarray, audio: np.ndarray, offsets: np.ndarray) -> None:
        self.features, self.audio, self.offsets = features, audio, offsets

    @classmethod
    def build(cls, decoder: IstftDecoder, latents: list[np.ndarray], threads: int,
              inputs: list[np.ndarray] | None = None, audio: np.ndarray | None = None) -> DecodedSubset:
        """Audio: the teacher's decode of `latents` (or `audio`, that decode already made);
        features: the trunk's of `inputs` (the student's predictions of those latents) or, by
        default, of `latents` themselves."""
        teacher = None if audio is not None else open_session(DECODER_CUT, threads)
        features, waves = [], []
        inputs = latents if inputs is None else inputs
        for latent, given in tqdm(list(zip(latents, inputs)), desc="decode", unit="utt", dynamic_ncols=True):
            if teacher is not None:
                z = np.ascontiguousarray(latent.astype(np.float32).T[None])
                waves.append(teacher.run([AUDIO], {LATENT: z})[0].reshape(-1).astype(np.float32))
            with torch.inference_mode():
                feats = decoder.trunk(torch.from_numpy(given.astype(np.float32).T[None]))[0]
            features.append(feats.T.to(torch.float16).numpy())
        offsets = np.concatenate([[0], np.cumsum([len(l) for l in latents])]).astype(np.int64)
        return cls(np.concatenate(features), audio if audio is not None else np.concatenate(waves), offsets)

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


def select_utterances(data: Path, config: DecoderTrainConfig) -> tuple[list[Utterance], list[Utterance]]:
    """(train, validation) utterances."""
    train, valid = [], []
    for index, utterance in enumerate(iter_utterances(data)):
        if index % config.holdout_every == config.holdout_every - 1:
            if len(valid) < config.valid_utterances:
                valid.append(utterance)
        elif index % config.every == 0:
            train.append(utterance)
    if not train or not valid:
        raise FileNotFoundError(f"too little teacher data in {data}: run python -m training.joe.make_data")
    return train, valid


@torch.no_grad()
def student_latents(student: JoeStudent, utterances: list[Utterance], group: int = 16) -> list[np.ndarray]:
    """The student's teacher-forced prediction of each utterance's z, [T, 192] float16."""
    student.eval()
    r = student.config.frames_per_step
    predicted = []
    for start in tqdm(range(0, len(utterances), group), desc="student z", unit="batch", dynamic_ncols=True):
        chunk = utterances[start : start + group]
        batch = make_batch(student, chunk)
        frames = student.denormalize(forward_steps(student, batch))
        first = 0
        for utterance, steps in zip(chunk, batch.num_steps.tolist()):
            predicted.append(frames[first * r : first * r + utterance.num_frames].numpy().astype(np.float16))
            first += steps
    return predicted


class DecoderTrainer:
    """Owns the head, optimizer and step. Invariant: step s trains on the crops drawn from
    seed (seed, s), so a resumed run sees exactly the batches an uninterrupted one would."""

    def __init__(self, config: DecoderTrainConfig, head_config: IstftHeadConfig, data: Path, out: Path,
                 threads: int, init: Path | None = None, student: Path = SHIPPED_WEIGHTS) -> None:
        self.config, self.out, self.data, self.student_folder = config, out, data, student
        torch.manual_seed(config.seed)
        teacher = HifiGanDecoder.from_state_dict(decoder_state_dict())
        self.decoder = load_decoder(teacher, init) if init else IstftDecoder.build(teacher, head_config)
        self.init = init
        self.positions = self.decoder.trunk.positions_per_frame
        self.hop = teacher.config.hop_length
        self.loss = WaveformDistillationLoss(teacher.config.sample_rate)
        self.optimizer = torch.optim.AdamW(self.decoder.head.parameters(), lr=config.learning_rate,
                                           betas=(0.8, 0.99), weight_decay=0.0)
        self.step, self.history, self.elapsed_seconds = 0, [], 0.0
        self.sets = self._subsets(threads)
        self.train_set, self.valid_set = self.sets["train"], self.sets["valid"]

    def _subsets(self, threads: int) -> dict[str, DecodedSubset]:
        """train / valid decode the teacher's z; student-train / student-valid (only with a
        student share) the student's predictions of the same utterances, cached under the
        student's weights' hash so that a retrained student is never served stale features."""
        cfg = self.config
        cache = self.out / f"decoded-every{cfg.every}-holdout{cfg.holdout_every}-valid{cfg.valid_utterances}"
        names = ["train", "valid"] + (["student-train", "student-valid"] if cfg.student_share > 0 else [])
        files = {name: cache / f"{name}.npz" for name in names}
        if cfg.student_share > 0:
            tag = hashlib.sha256((self.student_folder / WEIGHTS_FILE).read_bytes()).hexdigest()[:12]
            files |= {name: cache / f"{name}-{tag}.npz" for name in names if name.startswith("student")}
        sets = {name: DecodedSubset.load(path) for name, path in files.items() if path.is_file()}
        if len(sets) == len(names):
            return sets
        train, valid = select_utterances(self.data, self.config)
        student = JoeStudent.load(self.student_folder) if cfg.student_share > 0 else None
        for name in names:  # teacher sets first: the student sets reuse their audio
            if name in sets:
                continue
            utterances = train if name.endswith("train") else valid
            latents = [u.latent for u in utterances]
            if name.startswith("student"):
                teacher_audio = sets[name.removeprefix("student-")].audio
                sets[name] = DecodedSubset.build(self.decoder, latents, threads,
                                                 student_latents(student, utterances), teacher_audio)
            else:
                sets[name] = DecodedSubset.build(self.decoder, latents, threads)
            sets[name].save(files[name])
        return sets

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
        report = {}
        for name in ("valid", "student-valid"):
            if name not in self.sets:
                continue
            losses, snrs = [], []
            for index in range(len(self.sets[name])):
                feats, target = self.sets[name].utterance(index, self.positions, self.hop)
                pred = self.decoder.head(feats)
                losses.append(float(self.loss(pred, target)))
                snrs.append(snr_db(pred, target))
            prefix = name.replace("-", "_")
            report |= {f"{prefix}_loss": round(float(np.mean(losses)), 4),
                       f"{prefix}_snr_db": round(float(np.mean(snrs)), 2)}
        self.decoder.head.train()
        return report

    def train(self, stop_at: int | None = None) -> None:
        cfg = self.config
        last_step = cfg.steps if stop_at is None else min(stop_at, cfg.steps)
        mark = last_checkpoint = time.monotonic()
        edge = cfg.margin * self.hop // self.positions
        bar = tqdm(total=cfg.steps, initial=self.step, unit="step", dynamic_ncols=True)
        self.decoder.head.train()
        while self.step < last_step:
            feats, target = self._batch(np.random.default_rng([cfg.seed, self.step]))
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

    def _batch(self, generator: np.random.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        cfg = self.config
        from_student = round(cfg.batch * cfg.student_share)
        parts = [(self.train_set, cfg.batch - from_student)]
        if from_student:
            parts.append((self.sets["student-train"], from_student))
        crops = [subset.crops(generator, count, cfg.crop_frames, self.positions, self.hop)
                 for subset, count in parts if count]
        return torch.cat([f for f, _ in crops]), torch.cat([a for _, a in crops])

    def export(self, folder: Path, note: str | None = None) -> dict:
        path = save_head(self.decoder.head, folder)
        frames = int(self.train_set.offsets[-1])
        manifest = {
            "model": "joe iSTFT decoder head (model/families/joe/istft.py); its trunk is the voice's HiFi-GAN",
            "parameters": sum(p.numel() for p in self.decoder.head.parameters()),
            "weights_file": HEAD_WEIGHTS_FILE,
            "weights_bytes": path.stat().st_size,
            "weights_dtype": "float16",
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
            "data": {"folder": "teacher data of python -m training.joe.make_data",
                     "train_utterances": len(self.train_set), "valid_utterances": len(self.valid_set),
                     "train_hours": round(frames * self.hop / 22050 / 3600, 2)},
            "train": asdict(self.config),
            "initialized_from": str(self.init) if self.init else None,
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
    parser.add_argument("--data", type=Path, default=voice_cache("joe") / "data")
    parser.add_argument("--out", type=Path, default=voice_cache("joe") / "train-decoder")
    parser.add_argument("--export", type=Path, default=None, help="folder for the float16 head + manifest")
    parser.add_argument("--steps", type=int, default=defaults.steps)
    parser.add_argument("--every", type=int, default=defaults.every)
    parser.add_argument("--student-share", type=float, default=defaults.student_share,
                        help="share of each batch decoding the shipped student's predicted z")
    parser.add_argument("--init", type=Path, default=None, help="start from the head in this folder")
    parser.add_argument("--warmup", type=int, default=defaults.warmup_steps)
    parser.add_argument("--batch", type=int, default=defaults.batch)
    parser.add_argument("--lr", type=float, default=defaults.learning_rate)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: all cores)")
    parser.add_argument("--note", default=None, help="a sentence for the manifest (how this run was done)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    config = DecoderTrainConfig(steps=args.steps, every=args.every, batch=args.batch, learning_rate=args.lr,
                                seed=args.seed, student_share=args.student_share, warmup_steps=args.warmup)
    trainer = DecoderTrainer(config, IstftHeadConfig(), args.data, args.out, torch.get_num_threads(), args.init)
    if trainer.try_resume():
        print(f"resumed at step {trainer.step}")
    trainer.train()
    export = args.export or args.out / "export"
    manifest = trainer.export(export, args.note)
    print(f"exported {manifest['weights_bytes'] / 1e3:.0f} kB to {export}")


if __name__ == "__main__":
    main()
