"""GraphSubStepSampler (model/sampling/graph_substeps.py): SubStepSampler's draws from persistent
buffers, every filter always applied, over a padded batch."""
from __future__ import annotations

import random

import pytest
import torch

from model.sampling import SamplingParams, SamplingState
from model.sampling.graph_substeps import GraphSubStepSampler
from model.sampling.substeps import SubStepSampler

CPU = torch.device("cpu")
VOCAB, STEPS, PADDED = 48, 5, 8


def random_params(rng: random.Random, seed: int) -> SamplingParams:
    return SamplingParams(temperature=rng.choice([0.0, 0.7, 1.0, 1.4]), top_k=rng.choice([3, 10, 20]),
                          top_p=rng.choice([1.0, 0.9, 0.5]), seed=seed)


@pytest.mark.parametrize("case", range(6))
def test_a_frame_draws_what_the_eager_sampler_draws(case):
    """Seeded rows of mixed temperatures, top-k (K = the widest here, 20) and top-p, greedy rows,
    a batch narrower than the padding: the same tokens at every sub-step."""
    rng = random.Random(case)
    batch = rng.randint(1, PADDED)
    params = [random_params(rng, seed=100 * case + row) for row in range(batch)]
    eager_states = [SamplingState(p) for p in params]
    graph_states = [SamplingState(p) for p in params]
    logits = torch.randn(STEPS, PADDED, VOCAB, generator=torch.Generator().manual_seed(case)) * 3
    eager = SubStepSampler()
    eager.start(eager_states, STEPS, VOCAB, CPU)
    graph = GraphSubStepSampler(PADDED, STEPS, VOCAB, 20, CPU)
    graph.prepare(graph_states, [True] * batch, PADDED)
    for step in range(STEPS):
        want = eager.draw(logits[step, :batch], step)
        got = graph.draw(logits[step], step)
        assert got[:batch].tolist() == want.tolist(), f"step {step}"
        assert torch.equal(got[batch:], logits[step, batch:].argmax(dim=-1))  # padding rows are greedy


def test_a_row_that_does_not_emit_leaves_its_generator_alone():
    state = SamplingState(SamplingParams(temperature=1.0, top_k=10, seed=3))
    untouched = SamplingState(SamplingParams(temperature=1.0, top_k=10, seed=3))
    graph = GraphSubStepSampler(PADDED, STEPS, VOCAB, 10, CPU)
    graph.prepare([state], [False], 2)
    assert torch.equal(state.generator.get_state(), untouched.generator.get_state())
    graph.prepare([state], [True], 2)
    assert not torch.equal(state.generator.get_state(), untouched.generator.get_state())


def test_a_row_wider_than_the_buffers_is_refused():
    graph = GraphSubStepSampler(PADDED, STEPS, VOCAB, 10, CPU)
    with pytest.raises(ValueError, match="top-k of 20"):
        graph.prepare([SamplingState(SamplingParams(temperature=1.0, top_k=20))], [True], 1)


def test_frames_of_a_kept_batch_draw_what_the_eager_sampler_draws():
    """The warpers' columns stay in the buffers while the same rows come back: a first frame where
    a row sits out (greedy for that frame, its generator untouched), frames where it draws again,
    the padding grows, another batch of other params comes between two runs of this one; each
    frame's emitting rows draw the eager sampler's tokens."""
    params = [SamplingParams(temperature=0.7, top_k=10, top_p=0.9, seed=200),
              SamplingParams(temperature=1.0, top_k=20, top_p=1.0, seed=201),
              SamplingParams(temperature=1.4, top_k=3, top_p=0.5, seed=202),
              SamplingParams(temperature=1.2, top_k=5, top_p=0.8, seed=203)]
    eager_states = [SamplingState(p) for p in params]
    graph_states = [SamplingState(p) for p in params]
    graph = GraphSubStepSampler(PADDED, STEPS, VOCAB, 20, CPU)
    gen = torch.Generator().manual_seed(9)
    schedule = [([0, 1, 2], [True, False, True], 4)] + [([0, 1, 2], [True] * 3, 4)] * 2 \
        + [([0, 1, 2], [True] * 3, 8), ([3, 1], [True] * 2, 4)] + [([0, 1, 2], [True] * 3, 4)] * 2
    for frame, (rows, emits, padded) in enumerate(schedule):
        emitting = [i for i, emit in enumerate(emits) if emit]
        eager = SubStepSampler()
        eager.start([eager_states[rows[i]] for i in emitting], STEPS, VOCAB, CPU)
        graph.prepare([graph_states[r] for r in rows], emits, padded)
        logits = torch.randn(STEPS, padded, VOCAB, generator=gen) * 3
        for step in range(STEPS):
            want = eager.draw(logits[step, emitting], step)
            got = graph.draw(logits[step], step)
            assert got[emitting].tolist() == want.tolist(), f"frame {frame}, step {step}"
