from __future__ import annotations

import pytest
import torch
from transformers.generation.logits_process import (
    RepetitionPenaltyLogitsProcessor,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from model.sampling import Sampler, SamplingParams, SamplingState, apply_penalties, apply_warpers

# Chi-square critical values at p = 0.001, indexed by degrees of freedom.
CHI2_CRITICAL = {2: 13.82, 5: 20.52}


def states_for(*params: SamplingParams) -> list[SamplingState]:
    return [SamplingState(p) for p in params]


def hf_warped(row: torch.Tensor, params: SamplingParams) -> torch.Tensor:
    """The same row through transformers' warpers, in the order generate() builds them."""
    scores = row[None, :].clone()
    warpers = []
    if params.temperature != 1.0:
        warpers.append(TemperatureLogitsWarper(params.temperature))
    if params.top_k != 0:
        warpers.append(TopKLogitsWarper(params.top_k))
    if params.top_p < 1.0:
        warpers.append(TopPLogitsWarper(params.top_p))
    for warper in warpers:
        scores = warper(None, scores)
    return scores[0]


def chi_square(counts: torch.Tensor, probs: torch.Tensor) -> float:
    expected = probs * counts.sum()
    return float(((counts - expected) ** 2 / expected).sum())


def test_greedy_rows_take_argmax_even_in_a_mixed_batch():
    torch.manual_seed(0)
    logits = torch.randn(6, 40)
    greedy = SamplingParams(temperature=0.0)
    assert Sampler()(logits, states_for(*[greedy] * 6)).tolist() == logits.argmax(-1).tolist()
    mixed = states_for(greedy, SamplingParams(temperature=2.0), greedy, SamplingParams(top_k=5))
    tokens = Sampler()(logits[:4], mixed)
    assert tokens[0] == logits[0].argmax() and tokens[2] == logits[2].argmax()


def test_repetition_penalty_matches_transformers():
    torch.manual_seed(1)
    logits = torch.randn(3, 30) * 3
    penalties = (1.3, 0.7, 1.0)
    prompts = ([1, 2, 2, 5], [0, 29, 7], [3, 4])
    outputs = ([5, 9, 9], [12], [8])
    states = []
    for penalty, prompt, output in zip(penalties, prompts, outputs):
        state = SamplingState(SamplingParams(repetition_penalty=penalty, temperature=0.0), prompt)
        for token in output:
            state.append(token)
        states.append(state)
    ours = apply_penalties(logits, states)
    for row, (penalty, prompt, output) in enumerate(zip(penalties, prompts, outputs)):
        input_ids = torch.tensor([prompt + output])
        expected = RepetitionPenaltyLogitsProcessor(penalty)(input_ids, logits[row : row + 1].clone())[0]
        torch.testing.assert_close(ours[row], expected)
        assert Sampler()(logits, states)[row] == expected.argmax()
    assert not torch.equal(ours[0], logits[0]), "the penalty must change the penalised row"


def test_penalties_apply_to_logits_of_any_layout():
    torch.manual_seed(2)
    logits = torch.randn(20, 3) * 3
    state = SamplingState(SamplingParams(repetition_penalty=1.3), [1, 4, 17])
    states = [state, SamplingState(SamplingParams()), state]
    transposed = logits.t()  # [3, 20], dense but not contiguous
    assert torch.equal(apply_penalties(transposed, states), apply_penalties(transposed.contiguous(), states))
    assert not torch.equal(apply_penalties(transposed, states)[0], transposed[0])


def test_a_penalised_id_outside_the_vocabulary_is_refused_not_applied_to_another_row():
    logits = torch.zeros(2, 10)
    stray = SamplingState(SamplingParams(repetition_penalty=1.3), [12])  # row 1's token 2 if taken flat
    with pytest.raises(IndexError, match=r"\[0, 10\)"):
        apply_penalties(logits, [stray, SamplingState(SamplingParams())])


def test_penalty_history_keeps_each_id_once_and_grows():
    state = SamplingState(SamplingParams(repetition_penalty=1.1), [4, 4, 2])
    for token in list(range(40)) + [3, 3, 39]:
        state.append(token)
    ids = state.penalized_token_ids.tolist()
    assert sorted(ids) == list(range(40))
    assert state.num_generated == 43
    unpenalized = SamplingState(SamplingParams(), [1, 2])
    unpenalized.append(3)
    assert unpenalized.penalized_token_ids.numel() == 0 and unpenalized.num_generated == 1


@pytest.mark.parametrize("vocab_size", [64, 7])
def test_warpers_keep_the_same_tokens_as_transformers(vocab_size):
    torch.manual_seed(2)
    params = [
        SamplingParams(temperature=0.7, top_k=5),
        SamplingParams(temperature=1.3, top_p=0.8),
        SamplingParams(temperature=0.9, top_k=10, top_p=0.6),
        SamplingParams(top_p=0.3),
        SamplingParams(temperature=0.5),
        SamplingParams(top_k=vocab_size + 5, top_p=0.95),
        SamplingParams(temperature=2.0, top_k=1),
    ]
    logits = torch.randn(len(params), vocab_size) * 2
    ours = apply_warpers(logits.clone(), states_for(*params))
    for row, p in enumerate(params):
        expected = hf_warped(logits[row], p)
        kept = torch.isfinite(expected)
        assert torch.equal(torch.isfinite(ours[row]), kept), f"row {row} ({p}) keeps different tokens"
        torch.testing.assert_close(ours[row][kept], expected[kept])


def test_top_k_keeps_ties_like_transformers():
    logits = torch.tensor([[1.0, 3.0, 2.0, 2.0, 0.0, 2.0]])
    ours = apply_warpers(logits.clone(), states_for(SamplingParams(top_k=2)))
    assert torch.isfinite(ours[0]).tolist() == [False, True, True, True, False, True]
    assert torch.equal(torch.isfinite(ours[0]), torch.isfinite(hf_warped(logits[0], SamplingParams(top_k=2))))


def test_top_p_cutoff_rounds_like_transformers():
    # The lowest token's probability is 0.100000009 in float32: above float32(1 - 0.9) = 0.1 (kept
    # by transformers) but below 1 - float32(0.9) = 0.100000024.
    logits = torch.tensor([[-1.504077434539795, -5e-07, 0.0]])
    ours = apply_warpers(logits.clone(), states_for(SamplingParams(top_p=0.9)))
    assert torch.isfinite(ours[0]).all()
    assert torch.isfinite(hf_warped(logits[0], SamplingParams(top_p=0.9))).all()


def test_tiny_top_p_still_keeps_the_most_likely_token():
    # The cumulative sum of this row rounds to below 1, so without the keep-one rule every token goes.
    logits = torch.linspace(0.0, 0.01, 10)[None, :]
    ours = apply_warpers(logits.clone(), states_for(SamplingParams(top_p=1e-9)))
    assert torch.isfinite(ours[0]).tolist() == [False] * 9 + [True]
    expected = hf_warped(logits[0], SamplingParams(top_p=1e-9))
    assert torch.equal(torch.isfinite(ours[0]), torch.isfinite(expected))


def test_samples_follow_softmax_of_scaled_logits():
    torch.manual_seed(3)
    logits = torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0, 1.5])
    temperature = 0.7
    batch = 30_000
    states = states_for(*[SamplingParams(temperature=temperature)] * batch)
    tokens = Sampler()(logits.expand(batch, -1), states)
    counts = torch.bincount(tokens, minlength=6).double()
    assert chi_square(counts, torch.softmax(logits.double() / temperature, -1)) < CHI2_CRITICAL[5]


def test_filtered_samples_follow_the_renormalised_kept_set():
    torch.manual_seed(4)
    logits = torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0, 1.5])
    batch = 20_000
    tokens = Sampler()(logits.expand(batch, -1), states_for(*[SamplingParams(top_k=3)] * batch))
    counts = torch.bincount(tokens, minlength=6).double()
    kept = torch.tensor([0, 5, 1])
    assert counts.sum() == counts[kept].sum(), "tokens outside the top 3 were sampled"
    assert chi_square(counts[kept], torch.softmax(logits[kept].double(), -1)) < CHI2_CRITICAL[2]


def test_seeded_rows_sample_the_right_distribution():
    logits = torch.tensor([0.0, 1.0, 2.0, -0.5, 0.3, 1.2])
    batch = 4_000
    states = [SamplingState(SamplingParams(seed=seed)) for seed in range(batch)]
    tokens = Sampler()(logits.expand(batch, -1), states)
    counts = torch.bincount(tokens, minlength=6).double()
    assert chi_square(counts, torch.softmax(logits.double(), -1)) < CHI2_CRITICAL[5]


def decode(states: list[SamplingState], tracked: int, steps: int, vocab_size: int = 500) -> list[int]:
    """Runs a few steps with fresh logits each step; returns the tokens of row ``tracked``."""
    sampler = Sampler()
    logits_gen = torch.Generator().manual_seed(99)
    history = []
    for _ in range(steps):
        logits = torch.randn(vocab_size, generator=logits_gen).expand(len(states), -1)
        tokens = sampler(logits, states).tolist()
        for state, token in zip(states, tokens):
            state.append(token)
        history.append(tokens[tracked])
    return history


def test_seeded_row_is_reproducible_whatever_the_batch():
    seeded = SamplingParams(seed=1234, temperature=1.5, top_p=0.95, repetition_penalty=1.2)
    alone = decode([SamplingState(seeded)], tracked=0, steps=8)
    torch.manual_seed(5)
    neighbours = [
        SamplingState(SamplingParams(seed=7)),
        SamplingState(SamplingParams(temperature=0.0)),
        SamplingState(SamplingParams(top_k=3)),
    ]
    crowded = decode(neighbours[:2] + [SamplingState(seeded)] + neighbours[2:], tracked=2, steps=8)
    torch.manual_seed(6)
    reordered = decode([SamplingState(seeded)] + neighbours[::-1], tracked=0, steps=8)
    assert alone == crowded == reordered
    other_seed = decode([SamplingState(seeded.replace(seed=4321))], tracked=0, steps=8)
    assert other_seed != alone


def test_unseeded_rows_use_the_default_generator():
    logits = torch.randn(8, 300)
    states = states_for(*[SamplingParams(temperature=1.5)] * 8)
    torch.manual_seed(11)
    first = Sampler()(logits, states)
    torch.manual_seed(11)
    assert torch.equal(Sampler()(logits, states), first)


def test_min_tokens_blocks_stop_ids_until_enough_outputs():
    stop_ids = (3, 5)
    logits = torch.zeros(1, 8)
    logits[0, 3] = 10.0
    logits[0, 5] = 9.0
    state = SamplingState(SamplingParams(temperature=0.0, min_tokens=2))
    picks = []
    for _ in range(3):
        token = int(Sampler()(logits, [state], stop_ids)[0])
        state.append(token)
        picks.append(token)
    assert picks[0] not in stop_ids and picks[1] not in stop_ids and picks[2] == 3

    torch.manual_seed(7)
    sampling = states_for(*[SamplingParams(min_tokens=1)] * 500)
    tokens = Sampler()(logits.expand(500, -1), sampling, stop_ids)
    assert not torch.isin(tokens, torch.tensor(stop_ids)).any()


def test_min_tokens_blocks_stop_ids_only_in_the_rows_below_their_minimum():
    stop_ids = (3, 5)
    logits = torch.zeros(4, 8)
    logits[:, 3] = 10.0
    logits[:, 5] = 9.0
    states = states_for(*[SamplingParams(temperature=0.0, min_tokens=minimum) for minimum in (2, 0, 1, 0)])
    scores = apply_penalties(logits, states, stop_ids)
    for row, blocked in enumerate((True, False, True, False)):
        assert bool(torch.isinf(scores[row, list(stop_ids)]).all()) == blocked
        assert torch.equal(scores[row, [0, 1, 2, 4, 6, 7]], logits[row, [0, 1, 2, 4, 6, 7]])
    assert Sampler()(logits, states, stop_ids).tolist() == [0, 3, 0, 3]


def test_a_sampler_rebuilds_its_warpers_for_new_states():
    """A Sampler keeps what the warpers need while the same states come: other states of the same
    number must get their own params (top_k=1 first, then none at a high temperature)."""
    torch.manual_seed(9)
    logits = torch.zeros(64, 10)
    logits[:, 0] = 0.5
    sampler = Sampler()
    assert sampler(logits, states_for(*[SamplingParams(top_k=1)] * 64)).tolist() == [0] * 64
    assert sampler(logits, states_for(*[SamplingParams(top_k=1)] * 64)).tolist() == [0] * 64
    spread = sampler(logits, states_for(*[SamplingParams(temperature=5.0)] * 64))
    assert len(set(spread.tolist())) > 3


def test_callers_logits_are_left_untouched():
    torch.manual_seed(8)
    logits = torch.randn(3, 20)
    before = logits.clone()
    params = SamplingParams(repetition_penalty=1.5, min_tokens=4, top_k=4, top_p=0.5, temperature=0.3)
    Sampler()(logits, [SamplingState(params, [1, 2, 3]) for _ in range(3)], stop_token_ids=(0,))
    assert torch.equal(logits, before)


def test_logits_must_match_the_states():
    with pytest.raises(ValueError, match="one row per state"):
        Sampler()(torch.zeros(2, 5), states_for(SamplingParams()))


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"temperature": -0.1}, "temperature"),
        ({"temperature": float("nan")}, "temperature"),
        ({"top_p": 0.0}, "top_p"),
        ({"top_p": 1.5}, "top_p"),
        ({"top_k": -1}, "top_k"),
        ({"top_k": 2.5}, "top_k"),
        ({"repetition_penalty": 0.0}, "repetition_penalty"),
        ({"seed": "7"}, "seed"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"min_tokens": -1}, "min_tokens"),
        ({"min_tokens": 10, "max_tokens": 5}, "min_tokens"),
    ],
)
def test_invalid_params_name_the_field(changes, field):
    with pytest.raises(ValueError, match=field):
        SamplingParams(**changes)


def test_params_defaults_and_replace():
    params = SamplingParams()
    assert not params.greedy and params.replace(temperature=0.0).greedy
    with pytest.raises(ValueError, match="top_p"):
        params.replace(top_p=2.0)


def test_candidates_restrict_sampling_to_their_tokens_after_penalties():
    torch.manual_seed(0)
    vocab, batch = 50, 4
    logits = torch.randn(batch, vocab)
    candidates = torch.stack([torch.arange(10 * r, 10 * r + 8) for r in range(batch)])
    states = [SamplingState(SamplingParams(temperature=0.0, repetition_penalty=3.0), [int(candidates[r, 0])])
              for r in range(batch)]
    masked = torch.full_like(logits, float("-inf"))
    penalized = apply_penalties(logits, states)
    masked.scatter_(1, candidates, penalized.gather(1, candidates))
    greedy = Sampler()(logits, states, candidates=candidates)
    assert torch.equal(greedy, masked.argmax(dim=-1))
    sampled_states = [SamplingState(SamplingParams(temperature=1.0, top_p=0.9, seed=r)) for r in range(batch)]
    for _ in range(20):
        tokens = Sampler()(logits, sampled_states, candidates=candidates)
        assert all(int(tokens[r]) in candidates[r].tolist() for r in range(batch))
