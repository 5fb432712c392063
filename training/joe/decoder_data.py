"""What the decoder head trains on: a subset of the teacher data decoded once into a cache
(the frozen HiFi-GAN trunk's features and the teacher's waveform), and crops of it."""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from model.families.joe.istft import IstftDecoder
from model.families.joe.student import WEIGHTS_FILE, JoeStudent
from model.families.joe.teacher import AUDIO, DECODER_CUT, LATENT, open_session
from training.joe.dataset import make_batch
from training.joe.decoder_config import DecoderTrainConfig
from training.joe.dense import forward_steps
from training.joe.shards import Utterance, iter_utterances


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


def decoded_subsets(decoder: IstftDecoder, config: DecoderTrainConfig, data: Path, out: Path, student_folder: Path,
                    threads: int) -> dict[str, DecodedSubset]:
    """train / valid decode the teacher's z; student-train / student-valid (only with a
    student share) the student's predictions of the same utterances, cached under the
    student's weights' hash so that a retrained student is never served stale features."""
    cache = out / f"decoded-every{config.every}-holdout{config.holdout_every}-valid{config.valid_utterances}"
    names = ["train", "valid"] + (["student-train", "student-valid"] if config.student_share > 0 else [])
    files = {name: cache / f"{name}.npz" for name in names}
    if config.student_share > 0:
        tag = hashlib.sha256((student_folder / WEIGHTS_FILE).read_bytes()).hexdigest()[:12]
        files |= {name: cache / f"{name}-{tag}.npz" for name in names if name.startswith("student")}
    sets = {name: DecodedSubset.load(path) for name, path in files.items() if path.is_file()}
    if len(sets) == len(names):
        return sets
    train, valid = select_utterances(data, config)
    student = JoeStudent.load(student_folder) if config.student_share > 0 else None
    for name in names:  # teacher sets first: the student sets reuse their audio
        if name in sets:
            continue
        utterances = train if name.endswith("train") else valid
        latents = [u.latent for u in utterances]
        if name.startswith("student"):
            teacher_audio = sets[name.removeprefix("student-")].audio
            sets[name] = DecodedSubset.build(decoder, latents, threads, student_latents(student, utterances),
                                             teacher_audio)
        else:
            sets[name] = DecodedSubset.build(decoder, latents, threads)
        sets[name].save(files[name])
    return sets
