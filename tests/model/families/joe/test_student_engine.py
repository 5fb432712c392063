"""The student served by the engine equals the training-time (dense) computation, always ends
with exactly the announced frames, and survives preemption unchanged. Random small weights: these
tests are about the machinery, test_joe_speaks.py about the shipped voice."""
from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from tests.voice_packages import require_voice_packages

require_voice_packages()

from capacity.config import CapacityConfig
from engine.errors import RequestRejected
from model.sampling import SamplingParams
from model.families.base import SpeechPrompt
from model.llama.low_precision_linear import use_low_precision_linears
from model.families.joe.codec import load_joe_codec
from training.joe.dense import StudentBatch, forward_steps
from model.families.joe.family import STEP_SLOT_ID, JoeFamily
from model.families.joe.student import JoeStudent, StudentConfig
from tests.engine.conftest import core_on_step_clock, drain, engine_config, started

CONFIG = StudentConfig(hidden_size=64, intermediate_size=128, num_layers=2, num_heads=4, num_kv_heads=2,
                       prenet_size=64, frames_per_step=3)


@pytest.fixture(scope="module")
def student() -> JoeStudent:
    torch.manual_seed(0)
    model = JoeStudent(CONFIG)
    with torch.no_grad():
        model.prior_std.uniform_(0.5, 2.0)
        model.latent_mean.normal_(0, 0.1)
    return model.eval()


@pytest.fixture(scope="module")
def codec():
    return load_joe_codec()


def prompt(i: int) -> SpeechPrompt:
    gen = torch.Generator().manual_seed(i)
    phonemes = torch.randint(1, 150, (6 + 7 * i,), generator=gen).tolist()
    frames = 11 + 9 * i  # not a multiple of frames_per_step for every i: the last group is trimmed
    return SpeechPrompt(token_ids=[*phonemes, STEP_SLOT_ID], conditioning=torch.randn(frames, 192, generator=gen),
                        num_frames=frames, cache_salt=f"p{i}")


def serve(student, codec, num_blocks: int, prompts: list[SpeechPrompt]) -> tuple[dict, dict, int]:
    family = JoeFamily(student, codec, max_model_len=1024)
    # Production's admission and chunking, on a StepClock (deterministic, and every prompt starts).
    config = engine_config("unused", num_blocks=num_blocks, max_num_seqs=8, max_num_batched_tokens=24,
                           capacity=CapacityConfig())
    core = core_on_step_clock(config, family)
    for i, p in enumerate(prompts):
        core.add_request(f"s{i}", p, SamplingParams(temperature=0.0))
    streams = {f"s{i}": started(core, f"s{i}").stream for i in range(len(prompts))}
    chunks = drain(core)
    assert core.kv_manager.num_free_blocks == num_blocks
    outputs = {rid: torch.stack(s.outputs) for rid, s in streams.items()}
    preemptions = sum(got[-1].metrics.num_preemptions for got in chunks.values())
    return outputs, chunks, preemptions


def dense_replay(student: JoeStudent, p: SpeechPrompt, outputs: torch.Tensor) -> torch.Tensor:
    """The training-time forward, teacher-forced with the engine's own outputs."""
    phonemes = p.token_ids[:-1]
    steps = outputs.shape[0]
    previous = torch.cat([outputs.new_zeros(1, outputs.shape[1]), outputs[:-1]])
    batch = StudentBatch(
        phoneme_ids=torch.tensor([phonemes + [0] * steps]), num_phonemes=torch.tensor([len(phonemes)]),
        num_steps=torch.tensor([steps]), windows=student.prior_windows(p.conditioning), previous=previous,
        targets=outputs, target_mask=torch.ones_like(outputs),
    )
    with torch.no_grad():
        return forward_steps(student, batch)


def test_engine_equals_the_training_forward_and_ends_with_every_frame(student, codec):
    prompts = [prompt(i) for i in range(4)]
    outputs, chunks, _ = serve(student, codec, num_blocks=128, prompts=prompts)
    for i, p in enumerate(prompts):
        rid = f"s{i}"
        assert outputs[rid].shape == (CONFIG.num_steps(p.num_frames), CONFIG.step_channels)
        torch.testing.assert_close(dense_replay(student, p, outputs[rid]), outputs[rid], atol=1e-4, rtol=1e-4)
        assert chunks[rid][-1].finish_reason == "stop"
        audio = np.concatenate([c.pcm for c in chunks[rid]])
        assert audio.size == p.num_frames * codec.samples_per_frame


def test_half_precision_single_row_steps_stay_close(student, codec):
    # The shipped voice serves one stream's decode steps with float16 weight copies (low_precision_linear.py).
    prompts = [prompt(2)]
    exact, _, _ = serve(student, codec, num_blocks=64, prompts=prompts)
    half_student = copy.deepcopy(student)
    assert use_low_precision_linears(half_student) > 0
    half, _, _ = serve(half_student, codec, num_blocks=64, prompts=prompts)
    scale = exact["s0"].abs().max()
    assert 0 < (half["s0"] - exact["s0"]).abs().max() <= 1e-2 * scale


def test_preemption_changes_nothing(student, codec):
    prompts = [prompt(i) for i in range(4)]
    roomy, roomy_chunks, none = serve(student, codec, num_blocks=128, prompts=prompts)
    tight, tight_chunks, some = serve(student, codec, num_blocks=5, prompts=prompts)
    assert none == 0 and some > 0
    for rid in roomy:
        torch.testing.assert_close(tight[rid], roomy[rid], atol=1e-5, rtol=1e-5)
        np.testing.assert_allclose(np.concatenate([c.pcm for c in tight_chunks[rid]]),
                                   np.concatenate([c.pcm for c in roomy_chunks[rid]]), atol=1e-5)


def test_a_prompt_without_prior_is_refused_and_others_go_on(student, codec):
    core = core_on_step_clock(engine_config("unused", num_blocks=64, capacity=CapacityConfig()),
                              JoeFamily(student, codec, max_model_len=1024))
    core.add_request("good", prompt(1), SamplingParams())
    with pytest.raises(RequestRejected, match="prior") as refused:
        core.add_request("bad", SpeechPrompt(token_ids=[5, STEP_SLOT_ID]), SamplingParams())
    assert refused.value.code == "invalid_prompt"
    chunks = drain(core)
    assert list(chunks) == ["good"] and chunks["good"][-1].finish_reason == "stop"
