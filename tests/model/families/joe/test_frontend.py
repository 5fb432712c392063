from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.voice_packages import require_voice_packages

require_voice_packages()

from model.families.joe.frontend import TeacherFrontend
from model.families.joe.teacher import TeacherScales

TEXT = "Please check the results twice. Then send them to me!"


@pytest.fixture(scope="module")
def frontend(chorus_cache) -> TeacherFrontend:
    return TeacherFrontend()


def test_deterministic_and_consistent(frontend):
    first, second = frontend.run(TEXT), frontend.run(TEXT)
    np.testing.assert_array_equal(first.phoneme_ids, second.phoneme_ids)
    np.testing.assert_array_equal(first.durations, second.durations)
    np.testing.assert_array_equal(first.prior, second.prior)
    assert first.latent is None and first.audio is None  # the prompt cut stops at the prior
    assert first.prior.shape == (first.durations.sum(), 192)
    assert len(first.durations) == len(first.phoneme_ids)
    # The prior is the text encoder's per-phoneme mean repeated by duration: constant runs.
    ends = np.cumsum(first.durations)
    for start, end in zip(ends - first.durations, ends):
        np.testing.assert_array_equal(first.prior[start:end], first.prior[start:start + 1].repeat(end - start, 0))


def test_sentences_are_run_separately_and_joined(frontend):
    whole = frontend.run(TEXT)
    parts = [frontend.run("Please check the results twice."), frontend.run("Then send them to me!")]
    np.testing.assert_array_equal(whole.phoneme_ids, np.concatenate([p.phoneme_ids for p in parts]))
    np.testing.assert_allclose(whole.prior, np.concatenate([p.prior for p in parts]), atol=1e-6)


def test_same_prior_as_the_latent_cut(frontend, latent_frontend):
    prompt, latent = frontend.run(TEXT), latent_frontend.run(TEXT)
    np.testing.assert_array_equal(prompt.durations, latent.durations)
    np.testing.assert_allclose(prompt.prior, latent.prior, atol=1e-5)
    assert latent.latent.shape == latent.prior.shape


def test_length_scale_stretches_durations(frontend):
    normal = frontend.run(TEXT).num_frames
    slow = frontend.run(TEXT, TeacherScales(length_scale=1.5)).num_frames
    # Durations are ceil(w * length_scale) per phoneme, so short phonemes stretch less.
    assert 1.25 * normal < slow < 1.6 * normal


def test_speech_prompt(frontend):
    prompt = frontend.speech_prompt("Hello world.")
    result = frontend.run("Hello world.")
    assert prompt.token_ids == result.phoneme_ids.tolist()
    assert prompt.num_frames == result.num_frames == prompt.conditioning.shape[0]
    assert prompt.conditioning.dtype == torch.float32 and prompt.conditioning.shape[1] == 192


def test_empty_text_is_refused(frontend):
    with pytest.raises(ValueError, match="nothing to speak"):
        frontend.run("   ")


def test_prompt_frontend_adds_the_step_slot_and_scales_by_speed(chorus_cache):
    from model.families.joe.family import STEP_SLOT_ID
    from model.families.joe.prompt import JoePromptFrontend
    from model.families.joe.student import StudentConfig

    frontend = JoePromptFrontend(StudentConfig(frames_per_step=4))
    prompt = frontend.prepare(TEXT, "joe")
    assert prompt.token_ids[-1] == STEP_SLOT_ID and prompt.num_text_tokens == len(prompt.token_ids) - 1
    assert frontend.expected_outputs(prompt) == -(-prompt.num_frames // 4)
    again = frontend.prepare(TEXT, "joe")  # deterministic: the same prompt, in a new object
    assert again.token_ids == prompt.token_ids and again.token_ids is not prompt.token_ids
    # Exact to a frame per sentence although the voice rounds every phoneme's duration up.
    for speed in (0.5, 0.8, 1.25, 2.0):
        scaled = frontend.prepare(TEXT, "joe", speed=speed)
        assert abs(scaled.num_frames - prompt.num_frames / speed) <= 2, speed
    fast = frontend.prepare(TEXT, "joe", speed=2.0)
    # Prefix-cache entries must not mix rates: the step slot's input depends on the prior.
    assert fast.cache_salt != prompt.cache_salt
    with pytest.raises(ValueError, match="speed"):
        frontend.prepare(TEXT, "joe", speed=0.0)
    # Beyond ~2x every phoneme is down to one frame: the API stretches the rest.
    assert frontend.model_speed(3.0) == 2.0 and frontend.model_speed(0.25) == 0.5
    with pytest.raises(ValueError, match="unknown voice"):
        frontend.prepare(TEXT, "tara")


def test_a_prompt_over_max_tokens_is_refused_before_the_teacher_runs(chorus_cache, monkeypatch):
    from model.families.base import PromptTooLong
    from model.families.joe.frontend import MAX_RUN_PHONEME_IDS
    from model.families.joe.prompt import JoePromptFrontend
    from model.families.joe.student import StudentConfig

    frontend = JoePromptFrontend(StudentConfig())
    exact = len(frontend.prepare(TEXT, "joe").token_ids)  # phoneme ids and the step slot
    assert len(frontend.prepare(TEXT, "joe", max_tokens=exact).token_ids) == exact

    def costly(*args, **kwargs):
        raise AssertionError("the teacher ran on a prompt over the limit")

    monkeypatch.setattr(frontend.teacher.teacher, "run", costly)
    with pytest.raises(PromptTooLong) as refused:
        frontend.prepare(TEXT, "joe", max_tokens=exact - 1)
    assert (refused.value.tokens, refused.value.limit) == (exact, exact - 1)
    # Digits read aloud: ten phoneme ids a character, so characters alone cannot bound the cost.
    with pytest.raises(PromptTooLong):
        frontend.prepare("1 " * 300, "joe", max_tokens=1024)
    # Whatever the total allowed, one sentence (one teacher run) is bounded by itself.
    with pytest.raises(PromptTooLong) as refused:
        frontend.prepare("1 " * 150, "joe")
    assert refused.value.limit == MAX_RUN_PHONEME_IDS < refused.value.tokens
