"""The speaker encoder against the reference (golden fixture: the tiny base checkpoint's log-mel and
x-vector of one clip), its strict weight loading, and what `embed` accepts and refuses."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

from model.families.qwen3_tts import tiny_random
from model.families.qwen3_tts.config import Qwen3TtsConfig
from model.families.qwen3_tts.speaker_encoder import PREFIX, SpeakerEncoder
from model.families.qwen3_tts.speaker_mel import SAMPLE_RATE, LogMel

GOLDEN = Path(__file__).parent / "golden"
# Both measured at 0.0 (fp32, CPU, torch 2.13) where the fixture was made: the same operations in
# the same order, and a filterbank equal bit for bit to librosa's. On another CPU, MKL's float32 FFT
# takes other kernels: on an AVX-512/AMX Xeon the log-mel lies 1.4e-5 from a float64 computation
# and the fixture 1.7e-5, on opposite sides (2.8e-5 apart, in a quiet bin at -6.2). The bounds
# leave room for another BLAS, FFT or torch; a wrong window or filterbank is off by far more.
MEL_TOLERANCE = 1e-4
XVECTOR_TOLERANCE = 1e-4
# x-vectors of the random tiny network all point roughly one way (a tone's and white noise's
# have cosine 0.90), so only a tight bound tells a resampled clip from another one. Measured:
# 0.999992 from 16 kHz, 0.9999998 from 48 kHz; the 16 kHz clip read as 24 kHz gives far less.
RESAMPLED_COSINE = 0.9999


@pytest.fixture(scope="module")
def base_folder(chorus_cache) -> Path:
    folder = tiny_random.ensure_tiny_qwen3(chorus_cache, base=True)
    made_from = json.loads((GOLDEN / "cases.json").read_text())["checkpoints"]["base"]["model_sha256"]
    if hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest() != made_from:
        pytest.fail("the golden fixture was made from other base weights: regenerate it (make qwen3-golden)")
    return folder


@pytest.fixture(scope="module")
def config(base_folder) -> Qwen3TtsConfig:
    return Qwen3TtsConfig.load(base_folder)


@pytest.fixture(scope="module")
def encoder(base_folder, config) -> SpeakerEncoder:
    return SpeakerEncoder.from_checkpoint(base_folder, config)


@pytest.fixture(scope="module")
def golden() -> dict[str, np.ndarray]:
    with np.load(GOLDEN / "golden.npz") as arrays:
        return {name: arrays[name] for name in ("base_clip", "base_mel", "base_xvector")}


def max_error(actual: torch.Tensor, expected: np.ndarray) -> float:
    assert tuple(actual.shape) == expected.shape
    return float((actual - torch.from_numpy(expected)).abs().max())


def tone(rate: int, seconds: float = 1.5) -> np.ndarray:
    """A gliding tone with two harmonics, written directly at `rate` (band-limited far below 4 kHz,
    so every rate here carries the same signal)."""
    t = np.arange(int(seconds * rate)) / rate
    phase = 2 * np.pi * (140 * t + 60 * t**2)
    return (0.3 * np.sin(phase) + 0.12 * np.sin(2 * phase) + 0.05 * np.sin(3 * phase)).astype(np.float32)


def test_log_mel_is_the_references(golden):
    assert max_error(LogMel()(torch.from_numpy(golden["base_clip"])), golden["base_mel"]) <= MEL_TOLERANCE


def test_x_vector_is_the_references(encoder, golden):
    xvector = encoder.embed(golden["base_clip"], SAMPLE_RATE)
    assert xvector.dtype == torch.float32
    assert max_error(xvector, golden["base_xvector"]) <= XVECTOR_TOLERANCE


def test_embedding_is_deterministic_and_takes_tensors(encoder, golden):
    clip = golden["base_clip"]
    first = encoder.embed(clip, SAMPLE_RATE)
    assert torch.equal(first, encoder.embed(clip, SAMPLE_RATE))
    assert torch.equal(first, encoder.embed(torch.from_numpy(clip.astype(np.float64)), SAMPLE_RATE))


@pytest.mark.parametrize("rate", [16000, 48000])
def test_other_rates_are_resampled(encoder, rate):
    native = encoder.embed(tone(SAMPLE_RATE), SAMPLE_RATE)
    assert F.cosine_similarity(encoder.embed(tone(rate), rate), native, dim=0) >= RESAMPLED_COSINE
    # The bound tells the rates apart: the same samples read at the wrong rate miss it.
    assert F.cosine_similarity(encoder.embed(tone(rate), SAMPLE_RATE), native, dim=0) < RESAMPLED_COSINE


@pytest.mark.parametrize(("audio", "message"), [
    (np.zeros(0, np.float32), "empty"),
    (np.zeros((2, 4800), np.float32), "mono"),
    (np.zeros(4800, np.int16), "float"),
    (np.full(4800, np.nan, np.float32), "NaN"),
])
def test_unusable_audio_is_refused(encoder, audio, message):
    with pytest.raises(ValueError, match=message):
        encoder.embed(audio, SAMPLE_RATE)


def test_the_shortest_clip_is_stated(encoder):
    assert encoder.embed(tone(SAMPLE_RATE)[: encoder.min_samples], SAMPLE_RATE).shape == (encoder.shape.enc_dim,)
    with pytest.raises(ValueError, match=f"needs {encoder.min_samples} samples"):
        encoder.embed(tone(SAMPLE_RATE)[: encoder.min_samples - 1], SAMPLE_RATE)


def rewrite_weights(source: Path, target: Path, edit) -> Path:
    weights = load_file(str(source / "model.safetensors"))
    target.mkdir()
    save_file(edit(weights), str(target / "model.safetensors"))
    return target


def test_a_renamed_weight_is_named(base_folder, config, tmp_path):
    old, new = f"{PREFIX}fc.weight", f"{PREFIX}fc.kernel"
    renamed = rewrite_weights(base_folder, tmp_path / "renamed", lambda w: w | {new: w.pop(old)})
    with pytest.raises(ValueError, match=new):
        SpeakerEncoder.from_checkpoint(renamed, config)
    missing = rewrite_weights(base_folder, tmp_path / "missing", lambda w: w | {"unrelated": w.pop(old)})
    with pytest.raises(ValueError, match="lacks 1 weights.*fc.weight"):
        SpeakerEncoder.from_checkpoint(missing, config)


def test_checkpoints_without_an_encoder_are_refused(base_folder, config, chorus_cache, tmp_path):
    custom = tiny_random.ensure_tiny_qwen3(chorus_cache)
    with pytest.raises(ValueError, match="custom_voice checkpoint"):
        SpeakerEncoder.from_checkpoint(custom, Qwen3TtsConfig.load(custom))
    stripped = rewrite_weights(base_folder, tmp_path / "stripped",
                               lambda w: {k: v for k, v in w.items() if not k.startswith(PREFIX)})
    with pytest.raises(ValueError, match="no speaker_encoder"):
        SpeakerEncoder.from_checkpoint(stripped, config)


def test_silence_sits_at_the_log_floor(encoder):
    silence = np.zeros(SAMPLE_RATE // 10, np.float32)
    mel = LogMel()(torch.from_numpy(silence))
    assert mel.shape == (9, 128) and (mel == torch.tensor(1e-5).log()).all()
    assert encoder.embed(silence, SAMPLE_RATE).isfinite().all()
