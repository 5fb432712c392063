"""Parity with the reference: the tiny checkpoint's codec decodes every golden case's codes to the
audio the reference's speech tokenizer made of them (tests/model/qwen3_tts/golden, written by
make_golden.py), whole and streamed in pieces."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from model.codecs.qwen3_12hz import Qwen3Codec12Hz
from model.families.qwen3_tts.tiny_random import ensure_tiny_qwen3

GOLDEN = Path(__file__).resolve().parents[1] / "qwen3_tts" / "golden"
MANIFEST = json.loads((GOLDEN / "cases.json").read_text())
CASES = [case["name"] for case in MANIFEST["cases"] if "sample_rate" in case]
TOLERANCE = 1e-4
PIECES = (1, 2, 5, 3, 7)


@pytest.fixture(scope="module")
def golden() -> dict[str, np.ndarray]:
    with np.load(GOLDEN / "golden.npz") as arrays:
        return dict(arrays)


@pytest.fixture(scope="module")
def codec(chorus_cache) -> Qwen3Codec12Hz:
    folder = ensure_tiny_qwen3() / "speech_tokenizer"
    digest = hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest()
    # Both tiny checkpoints carry the same codec: the one loaded here is every case's.
    assert {c["codec_sha256"] for c in MANIFEST["checkpoints"].values()} == {digest}, "golden fixture is stale"
    return Qwen3Codec12Hz.from_folder(folder)


def streamed(codec: Qwen3Codec12Hz, codes: torch.Tensor) -> torch.Tensor:
    incremental = codec.incremental
    states, fed, audio = incremental.initial_states(codes.shape[0]), 0, []
    while fed < codes.shape[1]:
        size = min(PIECES[len(audio) % len(PIECES)], codes.shape[1] - fed)
        samples, states = incremental.step(codes[:, fed : fed + size], torch.full((codes.shape[0],), fed), states)
        audio.append(samples)
        fed += size
    return torch.cat(audio, dim=1)


def test_every_case_decodes_to_the_reference_audio(codec, golden):
    """All cases in one batch, each padded with code 0 to the longest: the decoder is causal, so
    frames after a case's end never change its audio."""
    assert {c["sample_rate"] for c in MANIFEST["cases"] if c["name"] in CASES} == {codec.sample_rate}
    cases = [torch.from_numpy(golden[f"codes_{name}"]) for name in CASES]
    codes = torch.zeros(len(cases), max(c.shape[0] for c in cases), *codec.frame_shape, dtype=torch.int64)
    for row, case in zip(codes, cases):
        row[: case.shape[0]] = case
    wants = [torch.from_numpy(golden[f"audio_{name}"]) for name in CASES]
    assert [want.numel() for want in wants] == [case.shape[0] * codec.samples_per_frame for case in cases]
    for how, audio in (("whole", codec.decode(codes)), ("streamed", streamed(codec, codes))):
        errors = {name: float((audio[i, : want.numel()] - want).abs().max())
                  for i, (name, want) in enumerate(zip(CASES, wants))}
        assert max(errors.values()) <= TOLERANCE, (how, {n: e for n, e in errors.items() if e > TOLERANCE})


@pytest.mark.parametrize("name", [name for name in CASES if f"ref_codes_{name}" in MANIFEST["arrays"]])
def test_a_clone_decodes_after_its_reference_frames_as_the_reference_does(codec, golden, name):
    """The reference decodes an in-context clone's frames after the reference clip's and cuts at
    the clip's share of the samples: exactly the clone's own frames here (the decoder is causal)."""
    reference, codes = (torch.from_numpy(golden[f"{kind}_{name}"]) for kind in ("ref_codes", "codes"))
    audio = codec.decode(torch.cat([reference, codes])[None])[0, reference.shape[0] * codec.samples_per_frame :]
    want = torch.from_numpy(golden[f"audio_icl_{name}"])
    assert audio.shape == want.shape and (audio - want).abs().max() <= TOLERANCE
