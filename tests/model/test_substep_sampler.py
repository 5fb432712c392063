"""SubStepSampler (model/sampling/substeps.py): the depth stage's draws, one frame of sub-steps."""
from __future__ import annotations

import pytest
import torch

from model.sampling import SamplingParams, SamplingState, apply_warpers
from model.sampling.substeps import SubStepSampler

CPU = torch.device("cpu")
VOCAB = 64


def full_scores(sampler: SubStepSampler, logits: torch.Tensor, step: int) -> torch.Tensor:
    ids, scores = sampler.scores(logits, step)
    return torch.full(logits.shape, float("-inf")).scatter_(1, ids, scores)


@pytest.mark.parametrize("top_ks", [(5, 5), (3, 9), (5, 0)])
def test_candidate_scores_are_the_full_vocabulary_warpers(top_ks):
    """Over K = max top-k candidates (or the whole vocabulary when a row keeps every id), the
    warped scores equal `apply_warpers` over the vocabulary, -inf at the same ids."""
    states = [SamplingState(SamplingParams(temperature=0.7, top_k=k, top_p=0.9)) for k in top_ks]
    logits = torch.randn(len(states), VOCAB, generator=torch.Generator().manual_seed(3))
    sampler = SubStepSampler()
    sampler.start(states, 2, VOCAB, CPU)
    ours, want = full_scores(sampler, logits, 1), apply_warpers(logits, states)
    assert torch.equal(torch.isneginf(ours), torch.isneginf(want))
    torch.testing.assert_close(ours[~torch.isneginf(want)], want[~torch.isneginf(want)])
    ids, _ = sampler.scores(logits, 1)
    assert ids.shape == (len(states), VOCAB if 0 in top_ks else max(top_ks))


def test_draws_stay_in_each_rows_top_k_and_greedy_rows_take_the_argmax():
    states = [SamplingState(SamplingParams(temperature=1.0, top_k=3)), SamplingState(SamplingParams(temperature=0.0)),
              SamplingState(SamplingParams(temperature=1.0, top_k=8, seed=5))]
    logits = torch.randn(3, VOCAB, generator=torch.Generator().manual_seed(4))
    sampler = SubStepSampler()
    for _ in range(50):
        sampler.start(states, 1, VOCAB, CPU)
        token = sampler.draw(logits, 0)
        assert token[0] in logits[0].topk(3).indices and token[2] in logits[2].topk(8).indices
        assert token[1] == logits[1].argmax()


def test_a_seeded_row_draws_the_same_alone_or_batched():
    """Whatever K the batch needs (here the whole vocabulary, for a row with top-k off), a seeded
    row's tokens are those it draws alone; the same seed again gives them again."""
    logits = torch.randn(4, 3, VOCAB, generator=torch.Generator().manual_seed(5))

    def seeded() -> SamplingState:  # a fresh state: a generator advances as it draws
        return SamplingState(SamplingParams(temperature=1.0, top_k=10, seed=7))

    def frame(states, rows):
        sampler = SubStepSampler()
        sampler.start(states, logits.shape[1], VOCAB, CPU)
        return torch.stack([sampler.draw(logits[rows, step], step) for step in range(logits.shape[1])], dim=1)

    alone = frame([seeded()], [0])[0]
    others = [SamplingState(SamplingParams(temperature=1.0, top_k=k)) for k in (0, 30, 2)]
    assert torch.equal(frame([others[0], seeded(), *others[1:]], [1, 0, 2, 3])[1], alone)
    assert torch.equal(frame([seeded()], [0])[0], alone)
    other_seed = SamplingState(SamplingParams(temperature=1.0, top_k=10, seed=8))
    assert not torch.equal(frame([other_seed], [0])[0], alone)


def test_states_with_history_are_refused():
    """A repetition penalty or a minimum length changes between draws: not a sub-step state."""
    sampler = SubStepSampler()
    penalized = SamplingState(SamplingParams(repetition_penalty=1.1), prompt_token_ids=[1, 2])
    with pytest.raises(ValueError, match="repetition penalty"):
        sampler.start([penalized], 2, VOCAB, CPU)
    with pytest.raises(ValueError, match="minimum length"):
        sampler.start([SamplingState(SamplingParams(min_tokens=1))], 2, VOCAB, CPU)


def test_a_draw_needs_its_frame_started_with_its_rows():
    sampler = SubStepSampler()
    sampler.start([SamplingState(SamplingParams(temperature=1.0))], 1, VOCAB, CPU)
    with pytest.raises(ValueError, match="2 rows for 1"):
        sampler.draw(torch.zeros(2, VOCAB), 0)


def test_a_frame_of_other_states_uses_their_params_not_the_last_frames():
    """`start` keeps what it made of a batch's states while the same states come back; other
    states (here the same batch size, a narrower top-k, then greedy) are prepared afresh."""
    logits = torch.randn(2, VOCAB, generator=torch.Generator().manual_seed(6))
    wide = [SamplingState(SamplingParams(temperature=1.0, top_k=20)) for _ in range(2)]
    narrow = [SamplingState(SamplingParams(temperature=1.0, top_k=2)) for _ in range(2)]
    sampler = SubStepSampler()
    drawn_wide: set[int] = set()
    for _ in range(60):
        sampler.start(wide, 1, VOCAB, CPU)
        drawn_wide.update(sampler.draw(logits, 0).tolist())
        sampler.start(narrow, 1, VOCAB, CPU)
        token = sampler.draw(logits, 0)
        assert all(t in logits[row].topk(2).indices for row, t in enumerate(token.tolist()))
    assert len(drawn_wide) > 4  # the wide frames kept their own top-k
    sampler.start([SamplingState(SamplingParams(temperature=0.0))] * 2, 1, VOCAB, CPU)
    assert torch.equal(sampler.draw(logits, 0), logits.argmax(dim=-1))
