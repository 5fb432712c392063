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
