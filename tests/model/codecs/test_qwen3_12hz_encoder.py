"""The 12 Hz codec's encoder against the reference (golden fixture: the tiny codec's codes of two
clips, tests/model/qwen3_tts/golden), its strict weight loading, and what `encode` refuses."""
from __future__ import annotations

import hashlib
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from model.codecs.qwen3_12hz import Qwen3Codec12Hz
from model.codecs.qwen3_12hz_config import Qwen3EncoderConfig
from model.codecs.qwen3_12hz_encoder import Qwen3Encoder12Hz
from model.codecs.qwen3_12hz_weights import WEIGHTS_FILE
from model.families.qwen3_tts.tiny_random import CODEBOOK, NUM_GROUPS, ensure_tiny_qwen3

GOLDEN = Path(__file__).resolve().parents[1] / "qwen3_tts" / "golden"
MANIFEST = json.loads((GOLDEN / "cases.json").read_text())
# Measured: 21 of 192 codes, in 3 of 12 frames, none in the first 5 groups. The reference
# resamples with librosa's soxr, Chorus with FFmpeg's resampler: their outputs differ by up to
# 0.011 inside the clip (0.09 at its end); the first groups absorb that, the later residual
# codebooks split hairs. The bound leaves room for another FFmpeg build, not for a wrong rate.
RESAMPLED_MISMATCHES = 32


@pytest.fixture(scope="module")
def folder(chorus_cache) -> Path:
    folder = ensure_tiny_qwen3() / "speech_tokenizer"
    digest = hashlib.sha256((folder / WEIGHTS_FILE).read_bytes()).hexdigest()
    assert {c["codec_sha256"] for c in MANIFEST["checkpoints"].values()} == {digest}, "golden fixture is stale"
    return folder


@pytest.fixture(scope="module")
def encoder(folder) -> Qwen3Encoder12Hz:
    return Qwen3Encoder12Hz.from_folder(folder)


@pytest.fixture(scope="module")
def golden() -> dict[str, np.ndarray]:
    with np.load(GOLDEN / "golden.npz") as arrays:
        return {name: arrays[name] for name in ("base_clip", "base_clip_codes", "clip16k", "clip16k_at_24k",
                                                "clip16k_codes")}


@pytest.mark.parametrize("clip, codes", [("base_clip", "base_clip_codes"), ("clip16k_at_24k", "clip16k_codes")])
def test_codes_equal_the_reference(encoder, golden, clip, codes):
    """Two lengths, neither a whole number of frames: the last frame is padded as Mimi pads it."""
    got = encoder.encode(golden[clip], 24000)
    assert got.dtype == torch.int64 and got.shape == (math.ceil(golden[clip].size / 1920), NUM_GROUPS)
    assert torch.equal(got, torch.from_numpy(golden[codes]))


def test_a_clip_at_another_rate_is_resampled_first(encoder, golden):
    got = encoder.encode(golden["clip16k"], 16000)
    want = torch.from_numpy(golden["clip16k_codes"])
    assert got.shape == want.shape
    assert torch.equal(got[:, :5], want[:, :5])
    assert int((got != want).sum()) <= RESAMPLED_MISMATCHES


def test_the_codes_of_decoded_audio_are_deterministic(encoder, folder, golden):
    """The decoder's own output (8 kHz in the tiny codec) encodes to the same codes every time."""
    codec = Qwen3Codec12Hz.from_folder(folder)
    audio = codec.decode(torch.from_numpy(golden["base_clip_codes"])[None])[0]
    first = encoder.encode(audio, codec.sample_rate)
    assert torch.equal(first, encoder.encode(audio.numpy(), codec.sample_rate))
    assert first.shape == (math.ceil(audio.numel() * 24000 / codec.sample_rate / 1920), NUM_GROUPS)
    assert int(first.min()) >= 0 and int(first.max()) < CODEBOOK
    assert len(set(first[:, 0].tolist())) > 1  # not one code for everything


@pytest.mark.parametrize("audio, message", [
    (np.zeros(0, dtype=np.float32), "empty"),
    (np.zeros((2, 4800), dtype=np.float32), "mono"),
    (np.zeros(4800, dtype=np.int16), "float"),
    (np.full(4800, np.nan, dtype=np.float32), "NaN"),
])
def test_encode_refuses(encoder, audio, message):
    with pytest.raises(ValueError, match=message):
        encoder.encode(audio, 24000)


def rewritten(folder: Path, tmp_path: Path, edit) -> Path:
    """A copy of the codec folder whose weights went through `edit` (a dict → dict function)."""
    copy = tmp_path / "speech_tokenizer"
    shutil.copytree(folder, copy)
    save_file(edit(load_file(str(folder / WEIGHTS_FILE))), str(copy / WEIGHTS_FILE))
    return copy


def test_weights_are_loaded_strictly(folder, tmp_path):
    dropped = "encoder.encoder_transformer.layers.0.mlp.fc1.weight"
    extra = "encoder.encoder_transformer.layers.1.mlp.fc1.weight"

    def edit(state):
        state[extra] = state.pop(dropped)
        return state

    with pytest.raises(ValueError, match=rf"missing {dropped}; unexpected {extra}"):
        Qwen3Encoder12Hz.from_folder(rewritten(folder, tmp_path, edit))


def test_a_codec_without_encoder_weights_refuses_clearly(folder, tmp_path):
    decoder_only = rewritten(folder, tmp_path, lambda state: {k: v for k, v in state.items()
                                                              if not k.startswith("encoder.")})
    with pytest.raises(ValueError, match="no encoder weights .* a reference clip cannot be encoded"):
        Qwen3Encoder12Hz.from_folder(decoder_only)


@pytest.mark.parametrize("change, message", [
    (dict(encoder_config=dict(use_conv_shortcut=True)), "use_conv_shortcut"),
    (dict(encoder_config=dict(vector_quantization_hidden_dimension=8, codebook_dim=16)), "codebook_dim"),
    (dict(encode_downsample_rate=960), "encode_downsample_rate"),
    (dict(encoder_valid_num_quantizers=33), "encoder_valid_num_quantizers"),
])
def test_config_refuses_what_is_not_computed(folder, change, message):
    data = json.loads((folder / "config.json").read_text())
    for key, value in change.items():
        data[key] = {**data[key], **value} if isinstance(value, dict) else value
    with pytest.raises(ValueError, match=message):
        Qwen3EncoderConfig.from_tokenizer_dict(data)
