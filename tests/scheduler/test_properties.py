"""Random workloads against the real scheduler and block manager: the invariants hold every step."""
from __future__ import annotations

import math
import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from capacity.config import CapacityConfig
from capacity.step_cost import StepCostModel

from .conftest import Simulator, due_at

request = st.tuples(st.integers(1, 40), st.integers(1, 30), st.integers(0, 3), st.booleans())
SKIP_SLACK = 1.0


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    requests=st.lists(request, min_size=1, max_size=12),
    num_blocks=st.integers(18, 60),
    max_num_seqs=st.integers(1, 6),
    extra_budget=st.integers(0, 20),
    chunk=st.one_of(st.none(), st.integers(1, 16)),
    policy=st.sampled_from(["fcfs", "priority"]),
    arrive_late=st.integers(0, 6),
)
def test_random_workloads_keep_every_invariant(
    requests, num_blocks, max_num_seqs, extra_budget, chunk, policy, arrive_late
):
    run_workload(requests, num_blocks, max_num_seqs, extra_budget, chunk, policy, arrive_late, clock=None)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    requests=st.lists(request, min_size=1, max_size=12),
    num_blocks=st.integers(18, 60),
    max_num_seqs=st.integers(1, 6),
    extra_budget=st.integers(0, 20),
    chunk=st.one_of(st.none(), st.integers(1, 16)),
    arrive_late=st.integers(0, 6),
    clock=st.randoms(use_true_random=False),
)
def test_random_deadlines_keep_every_invariant_and_the_deadline_rules(
    requests, num_blocks, max_num_seqs, extra_budget, chunk, arrive_late, clock
):
    run_workload(requests, num_blocks, max_num_seqs, extra_budget, chunk, "fcfs", arrive_late, clock)


def run_workload(requests, num_blocks, max_num_seqs, extra_budget, chunk, policy, arrive_late,
                 clock: random.Random | None) -> None:
    """Drives the workload to its end, checking every step; with `clock`, each running stream
    gets a random deadline before each step, and the step runs on a clock."""
    budget = max_num_seqs + extra_budget
    sim = Simulator(
        num_blocks=num_blocks,
        block_size=4,
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=budget,
        max_prefill_chunk=chunk,
        policy=policy,
        capacity=CapacityConfig(skip_slack_seconds=SKIP_SLACK),
        step_cost=StepCostModel(prior=(0.01, 0.02, 0.005)),
    )
    shared_prefix = list(range(500, 512))
    pending = []
    for i, (prompt_len, outputs, priority, shares) in enumerate(requests):
        tokens = (shared_prefix if shares else []) + [i * 1000 + t for t in range(prompt_len)]
        # Every request must fit the pool alone, or no schedule can finish it.
        outputs = min(outputs, num_blocks * 4 - len(tokens))
        pending.append((f"r{i}", tokens, max(outputs, 1), priority))
    for rid, tokens, outputs, priority in pending[: len(pending) - arrive_late]:
        sim.add(rid, 0, outputs, priority, tokens=tokens)
    late = pending[len(pending) - arrive_late :]
    now = None
    for step in range(5000):
        if late and step % 3 == 0:
            rid, tokens, outputs, priority = late.pop(0)
            sim.add(rid, 0, outputs, priority, tokens=tokens)
        if not sim.scheduler.num_unfinished and not late:
            break
        if clock is not None:
            now = float(step)
            for seq in sim.scheduler.running:
                due_at(seq, clock.choice([math.inf, now - 1.0, now + clock.uniform(0.0, 2.0)]))
        decoding = [s for s in sim.scheduler.running if not s.is_prefilling]
        prompt_pending = bool(sim.scheduler.waiting) or len(decoding) < len(sim.scheduler.running)
        out = sim.step(now)
        ids = [c.seq.request_id for c in out.chunks]
        assert len(ids) == len(set(ids)), "a sequence scheduled twice in one step"
        assert out.num_batched_tokens <= budget
        assert len(sim.scheduler.running) <= max_num_seqs
        for c in out.chunks:
            assert c.num_new_tokens >= 1 and c.end <= c.seq.num_tokens + 1
            if chunk is not None and c.seq.is_prefilling:
                assert c.num_new_tokens <= chunk
        if now is not None:
            check_deadline_rules(sim, out, decoding, now, prompt_pending)
        owned = sum(sim.kv.num_request_blocks(s.request_id) for s in sim.scheduler.running)
        assert sim.kv.num_used_blocks <= owned  # shared prefix blocks are counted once
        assert all(sim.kv.num_request_blocks(s.request_id) == 0 for s in sim.scheduler.waiting)
    else:
        raise AssertionError("workload did not drain")
    assert sorted(sim.finished) == sorted(rid for rid, *_ in pending)  # each exactly once
    assert sim.kv.num_free_blocks == num_blocks  # no leaks
    for rid, _, outputs, _ in pending:
        assert sim.sequences[rid].num_output_tokens == outputs  # counted once each, preempted or not


def check_deadline_rules(sim: Simulator, out, decoding: list, now: float, prompt_pending: bool) -> None:
    """Earliest deadline first among the decoding streams; only streams far ahead of their
    listener sit out, and only steps with other work and a prompt waiting or prefilling; prefill
    fits the smallest slack."""
    in_step = {id(c.seq) for c in out.chunks}
    decoded = [c for c in out.chunks if any(c.seq is s for s in decoding)]
    deadlines = [c.seq.deadline for c in decoded]
    skipped = [s for s in decoding if id(s) not in in_step and s.request_id not in out.preempted_ids]
    assert deadlines == sorted(deadlines)
    if skipped:
        assert out.chunks, "a step left empty while streams sat out"
        assert all(SKIP_SLACK < s.deadline - now < math.inf for s in skipped)
        assert prompt_pending, "streams sat out a step while no prompt was waiting or prefilling"
    slacks = [d - now for d in deadlines if d - now > 0]
    prefill = sum(c.num_new_tokens for c in out.chunks if all(c.seq is not s for s in decoding))
    if slacks and prefill:
        assert sim.scheduler.step_cost.predict(len(decoded), prefill) <= min(slacks) + 1e-9
