"""The sampling kernels (model/native/, bound by model/sampling/native.py) against their
definitions, the torch ops: the sub-step draw (`SubStepSampler`), the warpers' race (`Sampler`),
and their build (model/native/build.py)."""
from __future__ import annotations

import logging
import math
import random

import pytest
import torch

from model.native import build
from model.sampling import Sampler, SamplingParams, SamplingState
from model.sampling.candidates import CandidateWarper
from model.sampling.native import NativeCandidateDraw, NativeRace
from model.sampling.sampler import apply_warpers, draw_noise, exponential_race, warper_columns
from model.sampling.substeps import SubStepSampler

CPU = torch.device("cpu")
STEPS = 4

pytestmark = pytest.mark.skipif(not NativeCandidateDraw.available(CPU, 1),
                                reason="no C compiler: the torch path serves")


def random_params(rng: random.Random, seed: int) -> SamplingParams:
    return SamplingParams(temperature=rng.choice([0.0, 0.5, 0.9, 1.0, 1.7]), top_k=rng.choice([1, 5, 30, 50, 200]),
                          top_p=rng.choice([1.0, 1.0, 0.95, 0.8, 0.5]), seed=rng.choice([seed, None]))


def frame(params: list[SamplingParams], logits: torch.Tensor, native: bool) -> torch.Tensor:
    """[B, STEPS] tokens of one frame, each row from a fresh state of its params."""
    torch.manual_seed(0)  # the unseeded rows' noise
    sampler = SubStepSampler(native=native)
    sampler.start([SamplingState(p) for p in params], STEPS, logits.shape[-1], CPU)
    return torch.stack([sampler.draw(logits[step], step) for step in range(STEPS)], dim=1)


def served(params: list[SamplingParams], logits: torch.Tensor) -> int:
    """How many of the frame's sub-steps the kernel drew itself (not unsure)."""
    states = [SamplingState(p) for p in params]
    warper = CandidateWarper(states, logits.shape[-1], CPU)
    draw = NativeCandidateDraw(warper.temperature, warper.row_top_k, warper.row_top_p_cutoff,
                               [p.greedy for p in params], logits.shape[-1], warper.candidates)
    draw.start(warper.gumbel(states, STEPS, logits.shape[-1]))
    return sum(draw.draw(logits[step], step) is not None for step in range(STEPS))


@pytest.mark.parametrize("vocab", [64, 2048])
@pytest.mark.parametrize("case", range(6))
def test_a_frame_draws_the_torch_tokens_and_the_kernel_draws_nearly_all(vocab, case):
    """Mixed temperatures, top-k (1, below and at K), top-p, greedy and seeded rows: the same
    tokens with and without the kernel, which was unsure of at most one sub-step in four."""
    rng = random.Random(case)
    params = [random_params(rng, seed=10 * case + row) for row in range(rng.randint(1, 16))]
    logits = torch.randn(STEPS, len(params), vocab, generator=torch.Generator().manual_seed(case)) * 3
    assert torch.equal(frame(params, logits, native=True), frame(params, logits, native=False))
    if not all(p.greedy for p in params):
        assert served(params, logits) >= STEPS - 1


@pytest.mark.parametrize("pattern", ["ascending", "descending", "constant", "two values", "bfloat16"])
def test_ordered_and_tied_logits_draw_the_torch_tokens(pattern):
    """Orders that trouble a quickselect, and ties (bfloat16 logits tie often; torch's topk puts
    them in no promised order, so the kernel leaves them to it): the torch ops' tokens."""
    vocab, rows = 256, 6
    base = {"ascending": torch.arange(vocab, dtype=torch.float32) / 10,
            "descending": -torch.arange(vocab, dtype=torch.float32) / 10, "constant": torch.zeros(vocab),
            "two values": (torch.arange(vocab) % 2).float(),
            "bfloat16": torch.randn(vocab, generator=torch.Generator().manual_seed(2)).bfloat16().float()}[pattern]
    logits = base.repeat(STEPS, rows, 1)
    params = [SamplingParams(temperature=1.0, top_k=k, top_p=p, seed=row)
              for row, (k, p) in enumerate(((1, 1.0), (5, 0.9), (30, 1.0), (50, 0.5), (200, 0.95)))]
    params.append(SamplingParams(temperature=0.0))
    assert torch.equal(frame(params, logits, native=True), frame(params, logits, native=False))
    if pattern in ("ascending", "descending"):
        assert served(params, logits) == STEPS
    if pattern in ("constant", "two values"):
        assert served(params, logits) == 0


def test_nan_logits_are_left_to_torch():
    logits = torch.randn(STEPS, 3, 64)
    logits[:, :, ::7] = float("nan")
    params = [SamplingParams(temperature=1.0, top_k=30, top_p=0.9, seed=1), SamplingParams(temperature=0.0),
              SamplingParams(temperature=1.0, top_k=60, seed=2)]
    assert served(params, logits) == 0
    assert torch.equal(frame(params, logits, native=True), frame(params, logits, native=False))


def test_strided_and_bfloat16_logits_are_drawn_as_their_float32_copies():
    params = [SamplingParams(temperature=0.8, top_k=20, seed=row) for row in range(5)]
    wide = torch.randn(STEPS, 5, 128, generator=torch.Generator().manual_seed(3))
    every_other = wide[:, :, ::2]  # column stride 2
    assert torch.equal(frame(params, every_other, native=True), frame(params, every_other.contiguous(), native=False))
    low = wide.to(torch.bfloat16)
    assert torch.equal(frame(params, low, native=True), frame(params, low.float(), native=False))


def test_logits_of_another_shape_are_refused_before_the_kernel_reads_them():
    sampler = SubStepSampler(native=True)
    sampler.start([SamplingState(SamplingParams(temperature=1.0, top_k=5))], 1, 64, CPU)
    with pytest.raises(ValueError, match="for 1 rows of 64"):
        sampler.draw(torch.randn(1, 32), 0)


def test_switched_off_or_without_a_compiler_the_torch_path_serves(monkeypatch, tmp_path, caplog):
    state = [SamplingState(SamplingParams(temperature=1.0, top_k=5))]
    monkeypatch.setenv("CHORUS_NATIVE_CACHE", str(tmp_path))
    try:
        build.load.cache_clear()
        monkeypatch.setenv("CHORUS_NATIVE_KERNELS", "0")
        assert build.load("candidate_draw") is None
        build.load.cache_clear()
        monkeypatch.delenv("CHORUS_NATIVE_KERNELS")
        monkeypatch.setenv("CC", str(tmp_path / "no-such-compiler"))
        with caplog.at_level(logging.WARNING, logger=build.__name__):
            assert build.load("candidate_draw") is None
        assert "no C compiler" in caplog.text
        assert not list(tmp_path.iterdir())
    finally:
        build.load.cache_clear()
    sampler = SubStepSampler(native=False)
    sampler.start(state, 1, 64, CPU)
    assert sampler.draw(torch.randn(1, 64), 0).shape == (1,)


def test_a_library_is_built_once_and_then_loaded_from_the_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("CHORUS_NATIVE_CACHE", str(tmp_path))
    try:
        build.load.cache_clear()
        assert build.load("candidate_draw") is not None
        built = list(tmp_path.glob("candidate_draw-*.so"))
        assert len(built) == 1 and not list(tmp_path.glob("*.partial"))
        stamp = built[0].stat().st_mtime_ns
        build.load.cache_clear()
        assert build.load("candidate_draw") is not None
        assert built[0].stat().st_mtime_ns == stamp
    finally:
        build.load.cache_clear()


# --- The warpers' race: Sampler's pick -----------------------------------------------------------

def race_both(params: list[SamplingParams], scores: torch.Tensor,
              seed: int) -> tuple[torch.Tensor | None, torch.Tensor]:
    """(the kernel's tokens or None, the torch ops' tokens) from the same scores and noise."""
    states = [SamplingState(p) for p in params]
    torch.manual_seed(seed)
    noise = draw_noise(torch.empty_like(scores), states)
    vocab = scores.shape[-1]
    temperature, cutoff, top_k = warper_columns(states, vocab)
    use_top_p = any(p.top_p < 1.0 for p in params)
    greedy = [p.greedy for p in params]
    native = NativeRace(temperature, top_k, cutoff if use_top_p else None, greedy, vocab).race(scores, noise)
    sampled = exponential_race(apply_warpers(scores, states).softmax(dim=-1), noise.clone())
    want = torch.where(torch.tensor(greedy), scores.argmax(dim=-1), sampled)
    return native, want


def qwen3_code_0_like(rng: random.Random) -> SamplingParams:
    """Code 0's shape: the checkpoint's top-k 50 and top-p, some greedy and seeded requests."""
    return SamplingParams(temperature=rng.choice([0.0, 0.7, 0.9, 1.0]), top_k=rng.choice([50, 50, 10, 1]),
                          top_p=rng.choice([0.9, 0.9, 1.0, 0.5]), seed=rng.choice([None, rng.randrange(100)]))


def test_the_race_returns_the_torch_tokens_or_none_and_nearly_always_tokens():
    rng = random.Random(11)
    served = 0
    for case in range(200):
        params = [qwen3_code_0_like(rng) for _ in range(rng.randint(1, 16))]
        if all(p.greedy for p in params):
            continue
        scores = torch.randn(len(params), 65, generator=torch.Generator().manual_seed(case)) * 4
        scores[:, 64] = float("-inf") if case % 3 == 0 else scores[:, 64]  # a blocked stop id
        native, want = race_both(params, scores, case)
        if native is not None:
            assert torch.equal(native, want), case
            served += 1
    assert served >= 180  # unsure is the rare exception


@pytest.mark.parametrize("pattern", ["bfloat16", "integers", "all equal"])
def test_tied_scores_give_the_torch_tokens_or_none(pattern):
    """Ties everywhere (a cut between equal scores is torch's sort's own choice): never a token
    torch would not draw."""
    rng = random.Random(5)
    for case in range(40):
        params = [qwen3_code_0_like(rng) for _ in range(8)]
        raw = torch.randn(8, 65, generator=torch.Generator().manual_seed(case))
        scores = {"bfloat16": raw.to(torch.bfloat16).float(), "integers": (raw * 2).round(),
                  "all equal": torch.zeros(8, 65)}[pattern]
        native, want = race_both(params, scores, case)
        assert native is None or torch.equal(native, want), case


def test_nan_and_infinite_scores_are_left_to_torch():
    params = [SamplingParams(temperature=1.0, top_k=10, top_p=0.9), SamplingParams(temperature=0.0)]
    for bad in (float("nan"), float("inf")):
        scores = torch.randn(2, 65)
        scores[0, 3] = bad
        assert race_both(params, scores, 0)[0] is None
        scores = torch.randn(2, 65)
        scores[1, 3] = bad  # the greedy row
        if bad != bad:
            assert race_both(params, scores, 0)[0] is None


def test_a_tie_of_the_winner_and_the_runner_up_is_unsure():
    params = [SamplingParams(temperature=1.0, top_k=5)]
    scores = torch.tensor([[2.0, 2.0, 0.0, -1.0, -2.0, -3.0]])
    noise = torch.ones_like(scores)
    temperature, cutoff, top_k = warper_columns([SamplingState(p) for p in params], 6)
    race = NativeRace(temperature, top_k, None, [False], 6)
    assert race.race(scores, noise) is None
    noise[0, 1] = 1.5  # now id 0 wins clearly
    assert race.race(scores, noise).tolist() == [0]


def test_rows_without_a_small_top_k_over_a_large_vocabulary_stay_with_torch():
    assert not NativeRace.available(CPU, [0], 4096)
    assert not NativeRace.available(CPU, [50, 1000], 4096)
    assert NativeRace.available(CPU, [50, 0], 65)
    assert not NativeRace.available(torch.device("meta"), [50], 65)


def test_a_sampler_draws_the_same_with_and_without_the_kernel():
    """The whole Sampler (penalties, stop ids, candidates, seeded rows over several steps): the
    same tokens whichever path picks, so a seeded request does not depend on the build."""
    rng = random.Random(3)
    params = [SamplingParams(temperature=0.9, top_k=50, top_p=0.9, repetition_penalty=1.05, seed=row, min_tokens=2)
              for row in range(12)] + [qwen3_code_0_like(rng) for _ in range(4)]
    candidates = torch.arange(65).expand(len(params), -1)
    runs = []
    for native in (True, False):
        states = [SamplingState(p, prompt_token_ids=[1, 2, 3]) for p in params]
        sampler, tokens = Sampler(native=native), []
        torch.manual_seed(0)
        for step in range(20):
            logits = torch.randn(len(params), 80, generator=torch.Generator().manual_seed(step)) * 3
            picked = sampler(logits, states, [64], candidates)
            for state, token in zip(states, picked.tolist()):
                state.append(token)
            tokens.append(picked)
        runs.append(torch.stack(tokens))
    assert torch.equal(runs[0], runs[1])


def test_a_top_p_cut_at_a_cumulative_probability_is_left_to_torch():
    """Probabilities 3/4 and 1/4 with top-p 0.75: the lower one's cumulative probability is the
    cut-off itself, which rounding may put on either side. Both kernels say they are unsure."""
    params = [SamplingParams(temperature=1.0, top_k=2, top_p=0.75, seed=4)]
    row = torch.full((8,), -10.0)
    row[0], row[1] = math.log(3.0), 0.0
    logits = row.repeat(STEPS, 1, 1)
    assert served(params, logits) == 0
    assert torch.equal(frame(params, logits, native=True), frame(params, logits, native=False))
    temperature, cutoff, top_k = warper_columns([SamplingState(p) for p in params], 8)
    race = NativeRace(temperature, top_k, cutoff, [False], 8)
    assert race.race(logits[0], torch.ones(1, 8)) is None


def test_a_cached_library_that_does_not_load_leaves_the_torch_path(monkeypatch, tmp_path, caplog):
    """A file under the cached name that is no library (a disk that filled mid-copy, say)."""
    good, bad = tmp_path / "good", tmp_path / "bad"
    monkeypatch.setenv("CHORUS_NATIVE_CACHE", str(good))
    try:
        build.load.cache_clear()
        assert build.load("candidate_draw") is not None  # its name, in another folder
        bad.mkdir()
        for built in good.glob("candidate_draw-*.so"):
            (bad / built.name).write_bytes(b"not a shared library")
        monkeypatch.setenv("CHORUS_NATIVE_CACHE", str(bad))
        build.load.cache_clear()
        with caplog.at_level(logging.WARNING, logger=build.__name__):
            assert build.load("candidate_draw") is None
        assert "loading the candidate_draw kernel failed" in caplog.text
    finally:
        build.load.cache_clear()
