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
from pathlib import Path
from typing import Iterator

import numpy as np
import torch

from model.families.joe.hifigan import HifiGanDecoder
from model.families.joe.istft import IstftDecoder, IstftHead, IstftHeadConfig, load_decoder, save_head
from model.families.joe.student import SHIPPED_WEIGHTS
from model.families.joe.teacher import decoder_state_dict
from model.paths import voice_cache
from training.command import add_run_arguments, parse_run_arguments, resume_train_export
from training.joe.decoder_config import DecoderTrainConfig
from training.joe.decoder_data import decoded_subsets
from training.joe.spectral_loss import WaveformDistillationLoss, snr_db
from training.trainer import Trainer

MANIFEST = "decoder_manifest.json"
# A fixed setting rather than a DecoderTrainConfig field, so the shipped manifests' "train"
# settings describe every run with the same keys.
GRAD_CLIP = 10.0

Crops = tuple[torch.Tensor, torch.Tensor]  # trunk features [B, C, positions], teacher audio [B, samples]


class DecoderTrainer(Trainer):
    """Trains the head on crops of the decoded subsets. Invariant: step s trains on the crops
    drawn from seed (seed, s), so a resumed run sees exactly the batches an uninterrupted one would."""

    manifest_name = MANIFEST
    description = "joe iSTFT decoder head (model/families/joe/istft.py); its trunk is the voice's HiFi-GAN"

    def __init__(self, config: DecoderTrainConfig, head_config: IstftHeadConfig, data: Path, out: Path,
                 threads: int, init: Path | None = None, student: Path = SHIPPED_WEIGHTS) -> None:
        super().__init__(config, out, GRAD_CLIP)
        self.data, self.init = data, init
        teacher = HifiGanDecoder.from_state_dict(decoder_state_dict())
        self.decoder = load_decoder(teacher, init) if init else IstftDecoder.build(teacher, head_config)
        self.positions = self.decoder.trunk.positions_per_frame
        self.hop = teacher.config.hop_length
        self.distillation = WaveformDistillationLoss(teacher.config.sample_rate)
        self.optimizer = torch.optim.AdamW(self.decoder.head.parameters(), lr=config.learning_rate,
                                           betas=(0.8, 0.99), weight_decay=0.0)
        self.sets = decoded_subsets(self.decoder, config, data, out, student, threads)
        self.train_set, self.valid_set = self.sets["train"], self.sets["valid"]

    @property
    def module(self) -> IstftHead:
        return self.decoder.head

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
                losses.append(float(self.distillation(pred, target)))
                snrs.append(snr_db(pred, target))
            prefix = name.replace("-", "_")
            report |= {f"{prefix}_loss": round(float(np.mean(losses)), 4),
                       f"{prefix}_snr_db": round(float(np.mean(snrs)), 2)}
        self.decoder.head.train()
        return report

    def _batches(self) -> Iterator[Crops]:
        while True:
            yield self._batch(np.random.default_rng([self.config.seed, self.step]))

    def _batch(self, generator: np.random.Generator) -> Crops:
        cfg = self.config
        from_student = round(cfg.batch * cfg.student_share)
        parts = [(self.train_set, cfg.batch - from_student)]
        if from_student:
            parts.append((self.sets["student-train"], from_student))
        crops = [subset.crops(generator, count, cfg.crop_frames, self.positions, self.hop)
                 for subset, count in parts if count]
        return torch.cat([f for f, _ in crops]), torch.cat([a for _, a in crops])

    def _loss(self, batch: Crops) -> torch.Tensor:
        feats, target = batch
        edge = self.config.margin * self.hop // self.positions
        pred = self.decoder.head(feats)
        return self.distillation(pred[:, edge:-edge], target[:, edge:-edge])

    def _evaluate(self, train_loss: float) -> dict:
        return {"train_loss": round(train_loss, 4), **self.validate()}

    def _model_state(self) -> dict:
        return {"head": self.decoder.head.state_dict(), "head_config": self.decoder.head.config.to_dict()}

    def _restore(self, state: dict) -> None:
        self.decoder.head.load_state_dict(state["head"])

    def _save_weights(self, folder: Path) -> Path:
        return save_head(self.decoder.head, folder)

    def _data_summary(self) -> dict:
        frames = int(self.train_set.offsets[-1])
        return {"folder": "teacher data of python -m training.joe.make_data",
                "train_utterances": len(self.train_set), "valid_utterances": len(self.valid_set),
                "train_hours": round(frames * self.hop / 22050 / 3600, 2)}

    def _manifest_extras(self) -> dict:
        return {"initialized_from": str(self.init) if self.init else None}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    defaults = DecoderTrainConfig()
    add_run_arguments(parser, defaults, data=voice_cache("joe") / "data", out=voice_cache("joe") / "train-decoder",
                      export_help="folder for the float16 head + manifest")
    parser.add_argument("--every", type=int, default=defaults.every)
    parser.add_argument("--student-share", type=float, default=defaults.student_share,
                        help="share of each batch decoding the shipped student's predicted z")
    parser.add_argument("--init", type=Path, default=None, help="start from the head in this folder")
    parser.add_argument("--batch", type=int, default=defaults.batch)
    args = parse_run_arguments(parser, argv)
    config = DecoderTrainConfig(steps=args.steps, every=args.every, batch=args.batch, learning_rate=args.lr,
                                seed=args.seed, student_share=args.student_share, warmup_steps=args.warmup)
    trainer = DecoderTrainer(config, IstftHeadConfig(), args.data, args.out, torch.get_num_threads(), args.init)
    folder, manifest = resume_train_export(trainer, args.export, args.note)
    print(f"exported {manifest['weights_bytes'] / 1e3:.0f} kB to {folder}")


if __name__ == "__main__":
    main()
