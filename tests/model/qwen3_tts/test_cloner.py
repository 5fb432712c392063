"""The base checkpoint's voice cloner and the front end's `prepare(clone=)`: the encoders' output
on the golden clip is the reference's, and a clone prompts exactly as `prepare_clone` does."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from model.config import ModelConfig
from model.families.cloning import ClonedVoice, CloneRefused
from model.families.qwen3_tts.cloner import CODES_ARRAY, VECTOR_ARRAY
from model.loader import load_frontend

GOLDEN = Path(__file__).resolve().parent / "golden" / "golden.npz"
TRANSCRIPT = "The weather is nice."


@pytest.fixture(scope="module")
def golden() -> dict[str, np.ndarray]:
    with np.load(GOLDEN) as arrays:
        return {name: arrays[name] for name in ("base_clip", "base_xvector", "base_clip_codes")}


@pytest.fixture(scope="module")
def base(chorus_cache):
    return load_frontend(ModelConfig(model="tiny-random-qwen3-base"))


def test_clones_carry_the_reference_encoders_output(base, golden):
    assert base.clones and base.voices == ()
    cloner = base.voice_cloner()
    assert cloner is base.voice_cloner() and cloner.in_context and cloner.sample_rate == 24000
    timbre = cloner.clone(golden["base_clip"])
    assert (timbre.model, timbre.mode, timbre.transcript, set(timbre.arrays)) == (
        "tiny-random-qwen3-base", "x_vector", None, {VECTOR_ARRAY})
    np.testing.assert_allclose(timbre.arrays[VECTOR_ARRAY], golden["base_xvector"], atol=1e-5)
    whole = cloner.clone(golden["base_clip"], f"  {TRANSCRIPT} ")
    assert (whole.mode, whole.transcript) == ("in_context", TRANSCRIPT)
    np.testing.assert_array_equal(whole.arrays[CODES_ARRAY], golden["base_clip_codes"])


def test_a_clone_prompts_as_prepare_clone_does(base, golden):
    clone = base.voice_cloner().clone(golden["base_clip"], TRANSCRIPT)
    ours = base.prepare("Hello world.", "voice_0", clone=clone, language="english")
    want = base.prepare_clone("Hello world.", speaker_vector=torch.from_numpy(clone.arrays[VECTOR_ARRAY]),
                              reference_text=TRANSCRIPT, reference_codes=torch.from_numpy(clone.arrays[CODES_ARRAY]),
                              language="english")
    assert (ours.token_ids, ours.codec, ours.trailing_ids, ours.cache_salt) == (
        want.token_ids, want.codec, want.trailing_ids, want.cache_salt)


def test_the_reference_clip_does_not_count_against_the_text_budget(base, golden):
    """`max_tokens` bounds the text's share: the voice's own positions (its transcript and
    frames, the same for every request in it) come on top."""
    clone = base.voice_cloner().clone(golden["base_clip"], TRANSCRIPT)
    plain = base.voice_cloner().clone(golden["base_clip"])
    budget = len(base.prepare("Hello world.", "v", clone=plain).token_ids) + 2
    assert len(base.prepare("Hello world.", "v", clone=clone, max_tokens=budget).token_ids) > budget


def test_refusals_name_the_field(base, golden, chorus_cache):
    with pytest.raises(CloneRefused, match="empty") as empty:
        base.voice_cloner().clone(golden["base_clip"], "   ")
    assert empty.value.param == "transcript"
    foreign = ClonedVoice("another-model", "x_vector", {VECTOR_ARRAY: golden["base_xvector"]})
    with pytest.raises(CloneRefused, match="another-model") as other:
        base.prepare("Hi.", "v", clone=foreign)
    assert other.value.param == "voice"
    speakers = load_frontend(ModelConfig(model="tiny-random-qwen3"))
    assert not speakers.clones
    with pytest.raises(CloneRefused) as refused:
        speakers.voice_cloner()
    assert refused.value.param == "voice"
    with pytest.raises(ValueError, match="transcript"):
        ClonedVoice("m", "in_context", {})
