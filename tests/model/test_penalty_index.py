"""PenaltyIndex (model/sampling/penalties.py): the penalised positions a Sampler keeps across a
decode batch's steps, appending what each row took since, penalise as a fresh index would."""
from __future__ import annotations

import random

import pytest
import torch

from model.sampling import Sampler, SamplingParams, SamplingState, apply_penalties
from model.sampling.penalties import PenaltyIndex

VOCAB = 40


def penalised_states(rng: random.Random) -> list[SamplingState]:
    """Rows with and without a penalty, some with a prompt, one greedy."""
    params = [SamplingParams(repetition_penalty=1.3), SamplingParams(),
              SamplingParams(repetition_penalty=0.8, temperature=0.0), SamplingParams(repetition_penalty=1.1)]
    return [SamplingState(p, rng.sample(range(VOCAB), rng.randint(0, 5))) for p in params]


def test_a_kept_index_penalises_as_a_fresh_one_while_the_rows_grow():
    rng = random.Random(0)
    states = penalised_states(rng)
    index = PenaltyIndex(states, VOCAB, "cpu")
    for step in range(12):
        logits = torch.randn(len(states), VOCAB, generator=torch.Generator().manual_seed(step)) * 3
        index.update()
        kept = logits.clone()
        index.apply(kept)
        assert torch.equal(kept, apply_penalties(logits, states)), f"step {step}"
        for state in states:  # repeats included: an id already seen is not added again
            state.append(rng.randrange(VOCAB) if rng.random() < 0.6 else 3)
    assert len(index.positions) == sum(s.num_penalized for s in states)


def test_the_sampler_keeps_its_index_for_the_same_states_only():
    rng = random.Random(1)
    first, second = penalised_states(rng), penalised_states(rng)
    sampler = Sampler()
    greedy = [SamplingState(SamplingParams(temperature=0.0, repetition_penalty=1.5), [2, 7]) for _ in range(3)]
    logits = torch.randn(3, VOCAB, generator=torch.Generator().manual_seed(3))
    for states in (first, first, second, greedy, greedy):
        batch = logits[: len(states)] if len(states) <= 3 else torch.randn(len(states), VOCAB)
        sampler(batch, states)
    index = sampler._penalties
    assert index is not None and index.states == tuple(greedy)
    # The kept index follows what the rows appended between calls.
    for state in greedy:
        state.append(int(logits[0].argmax()))
    tokens = sampler(logits, greedy)
    assert sampler._penalties is index
    assert tokens.tolist() == apply_penalties(logits, greedy).argmax(dim=-1).tolist()


def test_an_id_outside_the_vocabulary_is_refused_when_it_is_read():
    state = SamplingState(SamplingParams(repetition_penalty=1.2), [1, 2])
    index = PenaltyIndex([state, SamplingState(SamplingParams())], 10, "cpu")
    index.update()
    state.append(12)  # row 1's id 2 if taken flat
    with pytest.raises(IndexError, match=r"\[0, 10\)"):
        index.update()
