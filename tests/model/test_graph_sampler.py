"""GraphSampler (persistent buffers, capturable) picks exactly what the reference Sampler picks."""
from __future__ import annotations

import random

import pytest
import torch

from model.sampling import Sampler, SamplingParams, SamplingState
from model.sampling.graph_sampler import GraphSampler, SeenTokens

VOCAB = 48
STOP = (5,)


def random_params(rng: random.Random) -> SamplingParams:
    return SamplingParams(
        temperature=rng.choice([0.0, 0.6, 1.0, 1.3]),
        top_p=rng.choice([1.0, 0.9, 0.5]),
        top_k=rng.choice([0, 0, 3, 10]),
        repetition_penalty=rng.choice([1.0, 1.1, 1.5, 0.8]),
        seed=rng.choice([None, rng.randrange(1000)]),
        min_tokens=rng.choice([0, 0, 3]),
    )


def twin_states(params: list[SamplingParams], prompts: list[list[int]]):
    """Two identical sets of states (same seeds, same histories): one per sampler."""
    return ([SamplingState(p, prompt) for p, prompt in zip(params, prompts)],
            [SamplingState(p, prompt) for p, prompt in zip(params, prompts)])


def candidates_for(batch: int, width: int, gen: torch.Generator) -> torch.Tensor:
    rows = [torch.randperm(VOCAB, generator=gen)[:width] for _ in range(batch)]
    for row in rows[::2]:
        row[0] = STOP[0]  # some rows may end
    return torch.stack(rows)


@pytest.mark.parametrize("width", [None, 12])
def test_steps_match_the_reference_sampler(width):
    rng = random.Random(width or 0)
    gen = torch.Generator().manual_seed(1)
    num_streams, steps, padded = 6, 12, 8
    params = [random_params(rng) for _ in range(num_streams)]
    prompts = [[rng.randrange(VOCAB) for _ in range(rng.randrange(0, 6))] for _ in range(num_streams)]
    reference_states, graph_states = twin_states(params, prompts)
    sampler, graph = Sampler(), GraphSampler(padded, VOCAB, STOP, width, "cpu")
    for step in range(steps):
        # The batch changes from step to step: streams join, leave and change rows.
        rows = rng.sample(range(num_streams), rng.randint(1, num_streams))
        logits = torch.randn(len(rows), VOCAB, generator=gen) * 3
        candidates = candidates_for(len(rows), width, gen) if width else None
        torch.manual_seed(100 + step)
        expected = sampler(logits, [reference_states[r] for r in rows], STOP, candidates)
        torch.manual_seed(100 + step)
        graph.prepare([graph_states[r] for r in rows], [True] * len(rows), padded)
        pad = padded - len(rows)
        padded_logits = torch.cat([logits, torch.randn(pad, VOCAB, generator=gen)])
        padded_candidates = None if candidates is None else torch.cat([candidates, candidates[:1].expand(pad, -1)])
        got = graph.sample(padded_logits, padded_candidates)[: len(rows)]
        assert got.tolist() == expected.tolist(), f"step {step}"
        for r, token in zip(rows, expected.tolist()):
            reference_states[r].append(token)
            graph_states[r].append(token)


def test_the_seen_bitmap_equals_each_penalized_history_across_evictions_and_eager_steps():
    rng = random.Random(3)
    states = [SamplingState(SamplingParams(repetition_penalty=1.2, seed=i), [rng.randrange(VOCAB) for _ in range(4)])
              for i in range(5)]
    graph = GraphSampler(3, VOCAB, STOP, None, "cpu")  # 3 slots for 5 streams: evictions
    for step in range(20):
        rows = rng.sample(range(5), rng.randint(1, 3))
        batch = [states[r] for r in rows]
        logits = torch.randn(len(rows), VOCAB)
        if step % 3 == 0:  # an eager step: the reference sampler, then the tokens are marked
            tokens = Sampler()(logits, batch, STOP)
            graph.seen.mark(batch, tokens)
        else:
            graph.prepare(batch, [True] * len(rows), 3)
            tokens = graph.sample(torch.cat([logits, torch.zeros(3 - len(rows), VOCAB)]))[: len(rows)]
        for state, token in zip(batch, tokens.tolist()):
            state.append(token)
        for state in batch:
            slot = graph.seen.slot(state)
            if slot is not None:
                held = graph.seen.bits[slot].nonzero()[:, 0].tolist()
                assert held == sorted(state.penalized_token_ids.tolist())


def test_rows_that_do_not_emit_leave_the_bitmap_alone():
    state = SamplingState(SamplingParams(repetition_penalty=1.3, temperature=0.0), [1, 2])
    graph = GraphSampler(2, VOCAB, STOP, None, "cpu")
    logits = torch.zeros(2, VOCAB)
    logits[:, 40] = 10.0
    graph.prepare([state], [False], 2)
    assert graph.sample(logits)[0].item() == 40
    assert graph.seen.bits[graph.seen.slot(state)].nonzero()[:, 0].tolist() == [1, 2]
    assert not graph.seen.bits[graph.seen.scratch, :40].any()


def test_padding_rows_are_greedy_and_use_the_scratch_slot():
    graph = GraphSampler(4, VOCAB, STOP, None, "cpu")
    graph.prepare([SamplingState(SamplingParams(seed=1))], [True], 4)
    assert graph.greedy[1:].all() and not graph.emits[1:].any()
    assert (graph.slots[1:] == graph.seen.scratch).all()


def test_prepare_rejects_more_rows_than_it_holds():
    graph = GraphSampler(2, VOCAB, STOP, None, "cpu")
    states = [SamplingState(SamplingParams()) for _ in range(3)]
    with pytest.raises(ValueError, match="rows"):
        graph.prepare(states, [True] * 3, 3)


def test_released_slots_are_reused_first():
    seen = SeenTokens(2, VOCAB, "cpu")
    a, b, c = (SamplingState(SamplingParams(repetition_penalty=1.1), [i]) for i in range(3))
    assert seen.slots_for([a, b]) == [0, 1]
    seen.release(a)
    assert seen.slots_for([c]) == [0] and seen.slot(b) == 1
    assert seen.bits[0].nonzero()[:, 0].tolist() == [2]


@pytest.mark.parametrize("penalty, winner", [(0.5, 1), (2.0, 2)])
def test_penalties_scale_negative_and_positive_scores_like_the_reference(penalty, winner):
    # Token 1 (seen, score -1) against token 2 (unseen, -1.5): a penalty below 1 lifts a seen
    # negative score (x * 0.5 = -0.5), above 1 sinks it (x * 2 = -2); then the same for +3 vs +2.
    logits = torch.full((2, VOCAB), -10.0)
    logits[0, 1], logits[0, 2] = -1.0, -1.5
    logits[1, 1], logits[1, 2] = 3.0, 2.0
    params = SamplingParams(temperature=0.0, repetition_penalty=penalty)
    reference, states = twin_states([params, params], [[1], [1]])
    expected = Sampler()(logits, reference).tolist()
    graph = GraphSampler(2, VOCAB, STOP, None, "cpu")
    graph.prepare(states, [True, True], 2)
    assert graph.sample(logits).tolist() == expected == [winner, winner]


def test_a_row_that_does_not_emit_leaves_its_generator_alone():
    other = SamplingState(SamplingParams(seed=1))
    state, twin = SamplingState(SamplingParams(seed=7)), SamplingState(SamplingParams(seed=7))
    graph = GraphSampler(2, VOCAB, STOP, None, "cpu")
    # e.g. a prompt's middle token beside a decoding stream: its output is thrown away
    graph.prepare([other, state], [True, False], 2)
    logits = torch.randn(1, VOCAB)
    graph.prepare([state], [True], 1)
    assert graph.sample(logits).tolist() == Sampler()(logits, [twin]).tolist()


@pytest.mark.parametrize("width", [None, 12])
def test_a_batch_kept_across_steps_matches_the_reference_sampler(width):
    """The buffers keep what follows from the rows' params while the same rows come back: through
    steps where min_tokens runs out (the stop token, likely whenever allowed, becomes allowed), a row
    sits a step out, the padding grows, and another batch comes between two runs of this one."""
    rng = random.Random(5)
    gen = torch.Generator().manual_seed(5)
    params = [SamplingParams(temperature=rng.choice([0.0, 0.8, 1.2]), top_p=rng.choice([1.0, 0.9]),
                             top_k=rng.choice([0, 8]), repetition_penalty=1.3, seed=10 + i, min_tokens=2)
              for i in range(4)]
    prompts = [[rng.randrange(VOCAB) for _ in range(3)] for _ in range(4)]
    reference_states, graph_states = twin_states(params, prompts)
    sampler, graph = Sampler(), GraphSampler(8, VOCAB, STOP, width, "cpu")
    schedule = [([0, 1, 2], [True] * 3, 4)] * 2 + [([0, 1, 2], [True, False, True], 4), ([0, 1, 2], [True] * 3, 4),
                                                   ([0, 1, 2], [True] * 3, 8)] + [([3, 0], [True] * 2, 4)] * 2 \
        + [([0, 1, 2], [True] * 3, 4)] * 2
    for step, (rows, emits, padded) in enumerate(schedule):
        logits = torch.randn(len(rows), VOCAB, generator=gen) * 3
        logits[:, STOP[0]] += 6.0
        candidates = candidates_for(len(rows), width, gen) if width else None
        emitting = [i for i, emit in enumerate(emits) if emit]
        expected = sampler(logits[emitting], [reference_states[rows[i]] for i in emitting], STOP,
                           None if candidates is None else candidates[emitting])
        graph.prepare([graph_states[r] for r in rows], emits, padded)
        pad = padded - len(rows)
        padded_logits = torch.cat([logits, torch.randn(pad, VOCAB, generator=gen)])
        padded_candidates = None if candidates is None else torch.cat([candidates, candidates[:1].expand(pad, -1)])
        got = graph.sample(padded_logits, padded_candidates)[emitting]
        assert got.tolist() == expected.tolist(), f"step {step}"
        for i, token in zip(emitting, expected.tolist()):
            reference_states[rows[i]].append(token)
            graph_states[rows[i]].append(token)
    assert any(state.num_generated > 2 for state in graph_states)  # the stop block ran out on the way
