"""Qwen3-TTS sampling against the reference (qwen-tts 0.1.1): code 0 and the code predictor's codes
are drawn from the distributions the reference's logits processors make.

The golden fixture's sampled run (`sampled_vivian_auto_en_stream`) recorded, per talker step, the
logits before and the scores after the reference's processors (RepetitionPenalty → MinLength(2) →
MinNewTokens(2) → SuppressTokens → Temperature → TopK → TopP, `cases.json` "processors"), and the
same for the code predictor's 15 steps of the first frame (Temperature → TopK → TopP). Chorus's
scores are taken where the family's `emit` samples: the logits it hands its samplers (code 0 after
the suppression mask, with its stop ids) and the states it hands them, through model/sampling's
`apply_penalties` and `apply_warpers` (what `Sampler` applies before its draw) for code 0 and
`SubStepSampler.scores` (over its top-k candidates) for the predictor's codes. The draw itself is
then checked statistically against softmax(scores)."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from model.config import ModelConfig
from model.families.qwen3_tts.family import Qwen3Family, TalkerOutput
from model.families.qwen3_tts.config import MIN_FRAMES
from model.families.qwen3_tts.stream import sub_talker_params
from model.loader import load_family, load_frontend
from model.sampling import Sampler, SamplingParams, SamplingState, apply_penalties, apply_warpers
from model.sampling.substeps import SubStepSampler

GOLDEN = Path(__file__).resolve().parent / "golden"
CASE = "sampled_vivian_auto_en_stream"
TOLERANCE = 1e-5
DRAWS = 8_000  # per row over the recorded final scores
FULL_PATH_DRAWS = 2_000  # per row from the logits, through penalties, mask and warpers
# Each token's share of a row's draws lies within Z_BOUND binomial standard deviations of its
# probability: a two-sided 5-sigma bound (5.7e-7 per token; about 250 tokens with probability > 0
# are checked, so a correct sampler fails with a chance below 2e-4, and the seeds are fixed).
Z_BOUND = 5.0


@pytest.fixture(scope="module")
def golden() -> dict[str, np.ndarray]:
    with np.load(GOLDEN / "golden.npz") as arrays:
        return {name: arrays[name] for name in arrays.files if name.startswith("sampled_")}


@pytest.fixture(scope="module")
def case() -> dict:
    return next(c for c in json.loads((GOLDEN / "cases.json").read_text())["cases"] if c["name"] == CASE)


@pytest.fixture(scope="module")
def family(chorus_cache) -> Qwen3Family:
    family = load_family(ModelConfig(model="tiny-random-qwen3", device="cpu", dtype="float32"))
    assert isinstance(family, Qwen3Family)
    return family


@pytest.fixture(scope="module")
def frontend(chorus_cache):
    return load_frontend(ModelConfig(model="tiny-random-qwen3"))


@pytest.fixture(scope="module")
def params(frontend, case) -> SamplingParams:
    """The checkpoint's own sampling (generation_config.json through the front end), which is what
    the reference's sampled run used; seeded as the case."""
    params = frontend.default_sampling()
    settings = case["generate"]
    assert (params.temperature, params.top_k, params.top_p, params.repetition_penalty) == (
        settings["temperature"], settings["top_k"], settings["top_p"], settings["repetition_penalty"])
    return params.replace(seed=case["seed"])


class RecordingSampler(Sampler):
    """A `Sampler` that keeps what it was handed: (logits, states, stop ids) per call, the logits
    -inf outside the call's candidates (what a draw may land on, over the whole vocabulary)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[torch.Tensor, list[SamplingState], tuple[int, ...]]] = []

    def __call__(self, logits, states, stop_token_ids=(), candidates=None):
        drawable = logits.clone()
        if candidates is not None:
            drawable = torch.full_like(logits, float("-inf")).scatter_(1, candidates, logits.gather(1, candidates))
        self.calls.append((drawable, list(states), tuple(stop_token_ids)))
        return super().__call__(logits, states, stop_token_ids, candidates)


class RecordingSubSteps(SubStepSampler):
    """A `SubStepSampler` that keeps the states of each frame it starts and the logits of each draw."""

    def __init__(self) -> None:
        super().__init__()
        self.starts: list[list[SamplingState]] = []
        self.calls: list[tuple[torch.Tensor, int]] = []

    def start(self, states, steps, vocab_size, device):
        self.starts.append(list(states))
        super().start(states, steps, vocab_size, device)

    def draw(self, logits, step):
        self.calls.append((logits.clone(), step))
        return super().draw(logits, step)


@pytest.fixture
def recorders(family, monkeypatch) -> tuple[RecordingSampler, RecordingSubSteps]:
    talker, predictor = RecordingSampler(), RecordingSubSteps()
    monkeypatch.setattr(family, "sampler", talker)
    monkeypatch.setattr(family.predictor, "sampler", predictor)
    return talker, predictor


def hidden_states(family: Qwen3Family, rows: int, seed: int = 0) -> torch.Tensor:
    """Talker hidden states for `emit` (the predictor's input; the checks below do not depend on them)."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(rows, family.backbone.hidden_size, generator=generator)


def chorus_scores(logits: torch.Tensor, states: list[SamplingState], stop_ids: tuple[int, ...]) -> torch.Tensor:
    return apply_warpers(apply_penalties(logits, states, stop_ids), states)


def assert_same_scores(ours: torch.Tensor, reference: np.ndarray, what: str) -> None:
    reference = torch.from_numpy(reference)
    masked = torch.isneginf(reference)
    assert torch.equal(torch.isneginf(ours), masked), (
        f"{what}: kept {torch.nonzero(~torch.isneginf(ours))[:, 0].tolist()}, "
        f"the reference {torch.nonzero(~masked)[:, 0].tolist()}")
    torch.testing.assert_close(ours[~masked], reference[~masked], atol=TOLERANCE, rtol=TOLERANCE, msg=what)


@pytest.fixture(scope="module")
def processors() -> dict[str, list[dict]]:
    return json.loads((GOLDEN / "cases.json").read_text())["processors"]["custom_voice"]


def test_the_recorded_processors_are_the_settings_chorus_applies(family, params, processors):
    """The reference's processor chains, in order, hold the request's and the sub-talker's
    settings and the family's two-frame minimum: what the score checks below compare against."""
    talker = {p["class"]: p for p in processors["talker"]}
    assert list(talker) == ["RepetitionPenaltyLogitsProcessor", "MinLengthLogitsProcessor",
                            "MinNewTokensLengthLogitsProcessor", "SuppressTokensLogitsProcessor",
                            "TemperatureLogitsWarper", "TopKLogitsWarper", "TopPLogitsWarper"]
    assert talker["RepetitionPenaltyLogitsProcessor"]["penalty"] == params.repetition_penalty
    assert talker["MinLengthLogitsProcessor"]["min_length"] == MIN_FRAMES == params.min_tokens
    assert talker["MinNewTokensLengthLogitsProcessor"]["min_new_tokens"] == MIN_FRAMES
    assert talker["MinNewTokensLengthLogitsProcessor"]["prompt_length_to_skip"] == 0
    assert (talker["TemperatureLogitsWarper"]["temperature"], talker["TopKLogitsWarper"]["top_k"],
            talker["TopPLogitsWarper"]["top_p"]) == (params.temperature, params.top_k, params.top_p)
    assert talker["TopPLogitsWarper"]["min_tokens_to_keep"] == 1
    depth = sub_talker_params(params, family.config.sampling)
    predictor = {p["class"]: p for p in processors["predictor"]}
    assert list(predictor) == ["TemperatureLogitsWarper", "TopKLogitsWarper", "TopPLogitsWarper"]
    assert (predictor["TemperatureLogitsWarper"]["temperature"], predictor["TopKLogitsWarper"]["top_k"],
            predictor["TopPLogitsWarper"]["top_p"]) == (depth.temperature, depth.top_k, depth.top_p)
    assert (depth.repetition_penalty, depth.min_tokens) == (1.0, 0)  # the predictor has no such processors


def test_code_0_scores_are_the_reference_processors(family, frontend, case, params, golden, recorders, processors):
    """Each talker step s, with the stream's state having seen the reference's ids[:s]: the scores
    Chorus samples from equal the reference's, -inf exactly where the reference's are."""
    talker, _ = recorders
    (suppress,) = [p for p in processors["talker"] if p["class"] == "SuppressTokensLogitsProcessor"]
    suppressed = torch.zeros(family.config.talker_vocab_size, dtype=torch.bool)
    for start, stop in suppress["suppress_token_ranges"]:  # [start, stop) runs
        suppressed[start:stop] = True
    logits, reference = golden["sampled_talker_logits"], golden["sampled_talker_scores"]
    ids, codes = golden["sampled_talker_ids"], golden["sampled_codes"]
    assert len(logits) == case["talker_steps"] and (codes[:, 0] == ids).all()
    eos = family.config.codec.eos
    stream = family.new_stream(frontend.prepare(case["text"], case["speaker"]), params)
    hidden = hidden_states(family, 1)
    for step in range(case["talker_steps"]):
        family.emit(TalkerOutput(hidden, torch.from_numpy(logits[step])[None]), [stream])
        masked, states, stop_ids = talker.calls[-1]
        assert states == [stream.sampling] and stop_ids == (eos,)
        assert torch.equal(torch.isneginf(masked[0]), suppressed)  # the family's mask is SuppressTokens
        assert stream.sampling.num_generated == step
        # MinLength(2) and MinNewTokens(2): end of speech is blocked before the second frame
        # only (here the warpers filter it out at every step, so the scores alone cannot show it).
        assert torch.isneginf(apply_penalties(masked, states, stop_ids)[0, eos]) == (step < MIN_FRAMES)
        assert_same_scores(chorus_scores(masked, states, stop_ids)[0], reference[step], f"talker step {step}")
        if step < len(codes):
            # The reference's frame, not the one just drawn: step s + 1 sees ids[:s + 1].
            assert not family.accept(stream, codes[step].tolist()).finished


def test_predictor_scores_are_the_reference_processors(family, frontend, case, params, golden, recorders):
    """The first frame's 15 code-predictor steps under the sub-talker settings."""
    _, predictor = recorders
    stream = family.new_stream(frontend.prepare(case["text"], case["speaker"]), params)
    logits = golden["sampled_talker_logits"][0]
    family.emit(TalkerOutput(hidden_states(family, 1), torch.from_numpy(logits)[None]), [stream])
    assert len(predictor.calls) == family.predictor.num_codes == len(golden["sampled_predictor_logits"])
    depth = stream.depth_sampling
    settings = case["generate"]
    expected = sub_talker_params(params, family.config.sampling)
    assert depth.params == expected
    assert (expected.temperature, expected.top_k, expected.top_p) == (
        settings["subtalker_temperature"], settings["subtalker_top_k"], settings["subtalker_top_p"])
    assert predictor.starts == [[depth]] and [step for _, step in predictor.calls] == list(range(len(predictor.calls)))
    sampler = SubStepSampler()
    predictor_logits = golden["sampled_predictor_logits"]
    sampler.start([depth], len(predictor_logits), predictor_logits.shape[-1], torch.device("cpu"))
    for step, logits in enumerate(predictor_logits):
        ours = full_vocabulary(*sampler.scores(torch.from_numpy(logits)[None], step), logits.shape[-1])
        assert_same_scores(ours[0], golden["sampled_predictor_scores"][step], f"predictor step {step}")


def full_vocabulary(ids: torch.Tensor, scores: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """Candidate scores [B, K] at their ids in a row of -inf [B, V]."""
    return torch.full((scores.shape[0], vocab_size), float("-inf")).scatter_(1, ids, scores)


def draw(logits: torch.Tensor, states: list[SamplingState], draws: int, seed: int,
         stop_ids: tuple[int, ...] = ()) -> torch.Tensor:
    """Counts [R, V] of `draws` draws of Chorus's sampler from each row of logits [R, V] under
    its state, all in one batch (row r's draws are `draws` rows sharing states[r]). Unseeded
    states draw from torch's default generator, seeded here; a seeded one from its own."""
    rows, vocab = logits.shape
    batch = [state for state in states for _ in range(draws)]
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        tokens = Sampler()(logits.repeat_interleave(draws, dim=0), batch, stop_ids)
    offsets = torch.arange(rows).repeat_interleave(draws) * vocab
    return torch.bincount(tokens + offsets, minlength=rows * vocab).view(rows, vocab)


def assert_follows(counts: torch.Tensor, scores: np.ndarray, what: str) -> None:
    """Counts [V] against softmax(scores): no draw where the probability is 0, each token's share
    within Z_BOUND binomial standard deviations of its probability, and a chi-square (tokens
    expected fewer than 5 times pooled into one cell) below its quantile of probability 1 - 1e-6
    (Wilson-Hilferty)."""
    probs = torch.from_numpy(scores).double().softmax(dim=-1)
    draws = int(counts.sum())
    assert counts[probs == 0].sum() == 0, f"{what}: drew a token the reference filtered out"
    p, n = probs[probs > 0], counts[probs > 0].double()
    sigma = (p * (1 - p) / draws).sqrt().clamp_min(1e-12)
    z = ((n / draws - p).abs() / sigma).max().item()
    assert z <= Z_BOUND or len(p) == 1, f"{what}: a share {z:.1f} standard deviations off"
    small = draws * p < 5
    expected = torch.cat((draws * p[~small], (draws * p[small]).sum()[None]))
    observed = torch.cat((n[~small], n[small].sum()[None]))
    observed, expected = observed[expected > 0], expected[expected > 0]
    if len(expected) > 1:
        chi2 = ((observed - expected) ** 2 / expected).sum().item()
        df = len(expected) - 1
        quantile = df * (1 - 2 / (9 * df) + 4.753 * math.sqrt(2 / (9 * df))) ** 3  # z(1 - 1e-6) = 4.753
        assert chi2 <= quantile, f"{what}: chi-square {chi2:.1f} over {df} degrees of freedom > {quantile:.1f}"


def final_scores(golden, family) -> list[tuple[str, np.ndarray]]:
    """Every recorded row of final scores, the talker's cut to the codebook (the codes the
    predictor's vocabulary holds): the reference's scores are -inf everywhere else, where a
    draw can never land (the exponential race gives a -inf score probability 0 exactly), and
    64 columns make 20 times fewer Exp(1) draws than 1,088."""
    codebook = family.config.predictor_vocab_size
    talker = golden["sampled_talker_scores"]
    assert np.isneginf(talker[:, codebook:]).all()
    return ([(f"talker step {s}", row[:codebook]) for s, row in enumerate(talker)]
            + [(f"predictor step {s}", row) for s, row in enumerate(golden["sampled_predictor_scores"])])


def test_draws_follow_softmax_of_the_reference_scores(family, golden):
    """Chorus's sampler over the reference's final scores (temperature 1, no filters: the scores
    are already warped), DRAWS draws a row from torch's default generator, picks each token with
    the probability softmax(scores) gives it."""
    rows = final_scores(golden, family)
    state = SamplingState(SamplingParams(temperature=1.0))
    counts = draw(torch.from_numpy(np.stack([row for _, row in rows])), [state] * len(rows), DRAWS, seed=0)
    for (what, row), row_counts in zip(rows, counts):
        assert_follows(row_counts, row, what)


def test_a_seeded_row_draws_from_the_same_law(family, golden):
    """The seeded path (each row's noise from its request's own generator): the two rows with the
    most tokens kept, DRAWS draws each."""
    rows = sorted(final_scores(golden, family), key=lambda r: np.isfinite(r[1]).sum())[-2:]
    states = [SamplingState(SamplingParams(temperature=1.0, seed=seed)) for seed in (11, 12)]
    counts = draw(torch.from_numpy(np.stack([row for _, row in rows])), states, DRAWS // 2, seed=0)
    for (what, row), row_counts in zip(rows, counts):
        assert_follows(row_counts, row, what)


def test_draws_from_the_logits_follow_the_reference_scores(family, frontend, case, params, golden, recorders):
    """The whole path, logits to token, over the full vocabulary: the request's params (min
    tokens as its stream's), repetition penalty after the reference's previous ids, the family's
    suppression mask and stop ids (as `emit` hands them to its sampler), warpers and draw, against
    softmax of the reference's final scores: the last talker step, and every predictor step
    under the stream's sub-talker params. FULL_PATH_DRAWS draws each (a sort per row)."""
    talker, _ = recorders
    step = case["talker_steps"] - 1
    stream = family.new_stream(frontend.prepare(case["text"], case["speaker"]), params)
    family.emit(TalkerOutput(hidden_states(family, 1), torch.from_numpy(golden["sampled_talker_logits"][step])[None]),
                [stream])
    masked, _, stop_ids = talker.calls[-1]
    seen = SamplingState(stream.sampling.params.replace(seed=None))
    for token in golden["sampled_talker_ids"][:step].tolist():
        seen.append(token)
    counts = draw(masked, [seen], FULL_PATH_DRAWS, seed=1, stop_ids=stop_ids)
    assert_follows(counts[0], golden["sampled_talker_scores"][step], f"talker step {step}")
    depth = SamplingState(stream.depth_sampling.params.replace(seed=None))
    counts = substep_draws(torch.from_numpy(golden["sampled_predictor_logits"]), depth, FULL_PATH_DRAWS, seed=2)
    for index, row_counts in enumerate(counts):
        assert_follows(row_counts, golden["sampled_predictor_scores"][index], f"predictor step {index}")


def substep_draws(logits: torch.Tensor, state: SamplingState, draws: int, seed: int) -> torch.Tensor:
    """Counts [S, V]: `draws` rows sharing `state` through one frame of S sub-steps of the
    predictor's SubStepSampler, sub-step s over logits[s] (its noise drawn at the frame's start)."""
    steps, vocab = logits.shape
    sampler = SubStepSampler()
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        sampler.start([state] * draws, steps, vocab, torch.device("cpu"))
    tokens = [sampler.draw(logits[step].expand(draws, -1), step) for step in range(steps)]
    return torch.stack([torch.bincount(row, minlength=vocab) for row in tokens])


def run_seeded(family: Qwen3Family, frontend, case, golden, requests: list[SamplingParams],
               hidden: torch.Tensor, steps: int = 4) -> list[list[list[int]]]:
    """Each request's frames from `emit` over the first `steps` recorded talker logits (the same
    logits for every row), batched together, each stream accepting its own outputs."""
    logits = torch.from_numpy(golden["sampled_talker_logits"][:steps])
    prompt = frontend.prepare(case["text"], case["speaker"])
    streams = [family.new_stream(prompt, p) for p in requests]
    frames: list[list[list[int]]] = [[] for _ in requests]
    live = list(range(len(requests)))
    for step in range(len(logits)):
        head_out = TalkerOutput(hidden[live], logits[step].expand(len(live), -1))
        outputs = family.emit(head_out, [streams[i] for i in live])
        for i, output in zip(list(live), outputs):
            frames[i].append(output)
            if family.accept(streams[i], output).finished:
                live.remove(i)
        if not live:
            break
    return frames


def test_a_seeded_request_repeats_exactly(family, frontend, case, params, golden):
    """The same seed gives the same 16 codes of every frame, alone or batched with other streams
    (seeded or not); another seed gives other codes."""
    hidden = hidden_states(family, 3, seed=1)
    alone = run_seeded(family, frontend, case, golden, [params], hidden[:1])
    again = run_seeded(family, frontend, case, golden, [params], hidden[:1])
    assert alone == again and len(alone[0]) >= MIN_FRAMES
    assert all(len(frame) == family.config.num_code_groups for frame in alone[0])
    batched = run_seeded(family, frontend, case, golden,
                         [params.replace(seed=None), params, params.replace(seed=params.seed + 7)], hidden[[1, 0, 2]])
    assert batched[1] == alone[0]
    other = run_seeded(family, frontend, case, golden, [params.replace(seed=params.seed + 7)], hidden[:1])
    assert other[0] != alone[0]
