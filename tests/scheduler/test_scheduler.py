from __future__ import annotations

import math

import pytest

from scheduler import QueueFullError, SchedulerConfig, SequenceStatus
from capacity.config import CapacityConfig
from capacity.step_cost import StepCostModel

from .conftest import Simulator, due_at, runs_dry_at


def chunk_sizes(out) -> dict[str, int]:
    return {c.seq.request_id: c.num_new_tokens for c in out.chunks}


def test_config_rejects_budget_smaller_than_running_cap():
    with pytest.raises(ValueError, match="max_num_batched_tokens"):
        SchedulerConfig(max_num_seqs=8, max_num_batched_tokens=4)


def test_prompt_is_prefilled_in_chunks_within_budget():
    sim = Simulator(num_blocks=64, max_num_seqs=4, max_num_batched_tokens=8)
    sim.add("a", prompt_len=20, outputs=2)
    assert [c.num_new_tokens for c in sim.step().chunks] == [8]
    assert [c.num_new_tokens for c in sim.step().chunks] == [8]
    last = sim.step().chunks[0]
    assert last.num_new_tokens == 4 and last.produces_output
    assert sim.step().chunks[0].num_new_tokens == 1  # decode


def test_decoding_streams_go_before_a_long_prompt():
    sim = Simulator(num_blocks=64, max_num_seqs=4, max_num_batched_tokens=6)
    sim.add("a", prompt_len=3, outputs=50)
    sim.step()
    sim.add("long", prompt_len=40, outputs=1)
    sim.add("b", prompt_len=2, outputs=50)
    for _ in range(6):
        sizes = chunk_sizes(sim.step())
        assert sizes["a"] == 1  # never starved
        assert sum(sizes.values()) <= 6


def test_prefilling_running_sequence_does_not_starve_later_decoders():
    # "long" is admitted before "b", but once b decodes it still comes first in every step.
    sim = Simulator(num_blocks=64, max_num_seqs=4, max_num_batched_tokens=4, max_prefill_chunk=2)
    sim.add("long", prompt_len=30, outputs=1)
    sim.add("b", prompt_len=2, outputs=30)
    sim.step()
    for _ in range(8):
        assert chunk_sizes(sim.step()).get("b") == 1


def test_running_cap_is_respected():
    sim = Simulator(num_blocks=256, max_num_seqs=3, max_num_batched_tokens=64)
    for i in range(6):
        sim.add(f"r{i}", prompt_len=4, outputs=5)
    out = sim.step()
    assert len(out.chunks) == 3
    assert len(sim.scheduler.waiting) == 3


def test_preemption_takes_newest_and_it_resumes_without_losing_outputs():
    # 6 blocks of 4 tokens: two sequences of 8 prompt tokens fit, then must grow.
    sim = Simulator(num_blocks=6, max_num_seqs=4, max_num_batched_tokens=32)
    old = sim.add("old", prompt_len=8, outputs=12)
    new = sim.add("new", prompt_len=8, outputs=12)
    preempted = []
    while sim.scheduler.num_unfinished:
        preempted += sim.step().preempted_ids
    assert preempted and preempted[0] == "new"
    assert old.num_preemptions == 0
    assert sorted(sim.finished) == ["new", "old"]
    assert new.num_output_tokens == 12  # outputs survived the preemption
    assert sim.kv.num_free_blocks == 6


def test_resumed_sequence_recomputes_prompt_and_outputs():
    sim = Simulator(num_blocks=4, max_num_seqs=2, max_num_batched_tokens=16)
    sim.add("a", prompt_len=4, outputs=9)
    b = sim.add("b", prompt_len=4, outputs=9)
    while b.num_preemptions == 0:
        sim.step()
    produced = b.num_output_tokens
    assert b.num_computed_tokens == 0 and b.status is SequenceStatus.PREEMPTED
    while b.status is not SequenceStatus.RUNNING:
        sim.step()
    first = next(c for c in sim.steps[-1].chunks if c.seq is b)
    assert first.start == 0 or first.start % sim.block_size == 0  # prefix cache may skip blocks
    assert first.end == 4 + produced  # recomputes up to its last output, then samples the next


def test_no_new_admissions_in_a_step_that_preempted():
    sim = Simulator(num_blocks=4, max_num_seqs=4, max_num_batched_tokens=16)
    sim.add("a", prompt_len=4, outputs=20)
    sim.add("b", prompt_len=4, outputs=20)
    sim.step()
    sim.add("c", prompt_len=2, outputs=1)
    for _ in range(20):
        out = sim.step()
        if out.preempted_ids:
            assert all(c.seq.request_id != "c" or c.start > 0 for c in out.chunks)


def test_priority_policy_orders_waiting_and_preempts_lowest_priority():
    sim = Simulator(num_blocks=64, max_num_seqs=1, max_num_batched_tokens=16, policy="priority")
    sim.add("low", prompt_len=4, outputs=1, priority=5)
    sim.add("high", prompt_len=4, outputs=1, priority=0)
    assert [c.seq.request_id for c in sim.step().chunks] == ["high"]
    sim2 = Simulator(num_blocks=5, max_num_seqs=4, max_num_batched_tokens=16, policy="priority")
    sim2.add("important-late", prompt_len=8, outputs=10, priority=0)
    sim2.add("background", prompt_len=8, outputs=10, priority=9)
    victims = []
    while sim2.scheduler.num_unfinished:
        victims += sim2.step().preempted_ids
    assert victims and set(victims) == {"background"}


def test_fcfs_ignores_priority():
    sim = Simulator(num_blocks=64, max_num_seqs=1, max_num_batched_tokens=16)
    sim.add("first", prompt_len=4, outputs=1, priority=5)
    sim.add("second", prompt_len=4, outputs=1, priority=0)
    assert [c.seq.request_id for c in sim.step().chunks] == ["first"]


def test_prefix_hit_skips_cached_blocks():
    sim = Simulator(num_blocks=64, max_num_seqs=4, max_num_batched_tokens=64)
    shared = list(range(100, 112))
    sim.add("a", prompt_len=0, outputs=1, tokens=shared + [1, 2])
    sim.run()
    sim.add("b", prompt_len=0, outputs=1, tokens=shared + [3])
    chunk = sim.step().chunks[0]
    assert chunk.start == 12 and chunk.num_new_tokens == 1


def test_full_prompt_hit_still_computes_one_token():
    sim = Simulator(num_blocks=64, max_num_seqs=4, max_num_batched_tokens=64)
    tokens = list(range(8))
    sim.add("a", prompt_len=0, outputs=1, tokens=tokens)
    sim.run()
    sim.add("b", prompt_len=0, outputs=1, tokens=tokens)
    chunk = sim.step().chunks[0]
    assert chunk.start == 4 and chunk.end == 8 and chunk.produces_output


def test_finish_and_abort_free_blocks_and_unknown_is_noop():
    sim = Simulator(num_blocks=16, max_num_seqs=4, max_num_batched_tokens=16)
    sim.add("a", prompt_len=10, outputs=100)
    sim.add("b", prompt_len=3, outputs=100)
    sim.step()
    assert sim.scheduler.abort("a") is not None
    assert sim.scheduler.abort("a") is None
    assert sim.scheduler.abort("nope") is None
    sim.scheduler.abort("b")
    assert sim.kv.num_free_blocks == 16 and not sim.scheduler.running


def test_waiting_queue_limit():
    sim = Simulator(num_blocks=16, max_num_seqs=1, max_num_batched_tokens=4, max_waiting=2)
    sim.add("a", prompt_len=2, outputs=1)
    sim.add("b", prompt_len=2, outputs=1)
    with pytest.raises(QueueFullError):
        sim.add("c", prompt_len=2, outputs=1)


def test_duplicate_id_rejected():
    sim = Simulator(num_blocks=16, max_num_seqs=1, max_num_batched_tokens=4)
    sim.add("a", prompt_len=2, outputs=1)
    with pytest.raises(ValueError, match="already"):
        sim.add("a", prompt_len=2, outputs=1)


# ---- deadlines (the engine's listeners set them; here they are set by hand) ------------------------


def decoding_sim(n: int, skip_slack_seconds: float | None, **config) -> tuple[Simulator, list]:
    """n streams past their prompts, decoding."""
    sim = Simulator(num_blocks=256, max_num_seqs=8, max_num_batched_tokens=64,
                    capacity=CapacityConfig(skip_slack_seconds=skip_slack_seconds), **config)
    seqs = [sim.add(f"s{i}", prompt_len=4, outputs=100) for i in range(n)]
    sim.step()
    return sim, seqs


def test_decoding_streams_go_earliest_deadline_first():
    sim, (a, b, c) = decoding_sim(3, skip_slack_seconds=None)
    due_at(a, 5.0), due_at(b, 1.0), runs_dry_at(c, 3.0)  # a playing listener's deadline counts the same
    assert [ch.seq.request_id for ch in sim.step(now=0.0).chunks] == ["s1", "s2", "s0"]
    for seq in (a, b, c):
        due_at(seq, float("inf"))
    assert [ch.seq.request_id for ch in sim.step(now=0.0).chunks] == ["s0", "s1", "s2"]  # ties: admission order


def test_a_paused_stream_takes_no_step_even_alone_and_keeps_its_blocks():
    sim, (paused, other) = decoding_sim(2, skip_slack_seconds=2.0)
    paused.paused = True
    assert list(chunk_sizes(sim.step(now=0.0))) == ["s1"]
    sim.scheduler.abort("s1")
    assert sim.step(now=0.0).chunks == []  # alone, and still no step: its client is behind
    assert sim.scheduler.kv.num_used_blocks > 0 and paused.status is SequenceStatus.RUNNING
    paused.paused = False
    assert list(chunk_sizes(sim.step(now=0.0))) == ["s0"]


def test_a_stream_far_ahead_sits_out_steps_that_carry_a_prompt():
    sim, (ahead, behind, unknown) = decoding_sim(3, skip_slack_seconds=2.0)
    runs_dry_at(ahead, 10.0 + 2.5), runs_dry_at(behind, 10.0 + 0.5)  # unknown keeps inf: no listener to outrun
    # No prompt in the step: it is no faster for anyone without the stream ahead.
    assert sorted(chunk_sizes(sim.step(now=10.0))) == ["s0", "s1", "s2"]
    sim.add("s3", prompt_len=4, outputs=100)  # a new stream, whose first audio waits on its prompt
    assert sorted(chunk_sizes(sim.step(now=10.0))) == ["s1", "s2", "s3"]
    assert sorted(chunk_sizes(sim.step(now=10.0))) == ["s0", "s1", "s2", "s3"]  # prompt done
    sim.add("s4", prompt_len=4, outputs=100)
    assert sorted(chunk_sizes(sim.step())) == ["s0", "s1", "s2", "s3", "s4"]  # no clock, no skipping
    for rid in ("s1", "s2", "s3", "s4"):
        sim.scheduler.abort(rid)
    sim.add("s5", prompt_len=4, outputs=100)
    sim.scheduler.waiting[0].paused = True  # a prompt that cannot start now: the step would be empty
    assert list(chunk_sizes(sim.step(now=10.0))) == ["s0"]  # nobody else needs the step


def paced_sim(n: int, pace_slack_seconds: float | None = 2.0) -> tuple[Simulator, list]:
    """n streams past their prompts, decoding, with batch-aware pacing."""
    sim = Simulator(num_blocks=256, max_num_seqs=8, max_num_batched_tokens=64,
                    capacity=CapacityConfig(skip_slack_seconds=None, pace_slack_seconds=pace_slack_seconds))
    seqs = [sim.add(f"s{i}", prompt_len=4, outputs=100) for i in range(n)]
    sim.step()
    return sim, seqs


def test_streams_far_ahead_take_no_step_until_one_falls_back_then_all_share_it():
    sim, (a, b, c) = paced_sim(3)
    runs_dry_at(a, 10.0 + 2.4), runs_dry_at(b, 10.0 + 3.0), runs_dry_at(c, 10.0 + 5.0)
    assert sim.step(now=10.0).chunks == []  # every listener holds more than 2 s: nobody needs a step
    assert sim.scheduler.seconds_until_step(10.0) == pytest.approx(0.4)  # when a's falls to 2 s
    assert sorted(chunk_sizes(sim.step(now=10.4))) == ["s0", "s1", "s2"]  # a needs it; b and c join
    assert sim.scheduler.seconds_until_step(10.4) == 0.0
    assert sorted(chunk_sizes(sim.step())) == ["s0", "s1", "s2"]  # no clock, no pacing


def test_work_besides_paced_streams_steps_at_once_and_they_join_it():
    sim, (a, b) = paced_sim(2)
    runs_dry_at(a, 10.0 + 3.0)
    assert sorted(chunk_sizes(sim.step(now=10.0))) == ["s0", "s1"]  # b has no listener (inf): it needs steps
    sim.scheduler.abort("s1")
    sim.add("new", prompt_len=4, outputs=100)  # a prompt waits
    assert sim.scheduler.seconds_until_step(10.0) == 0.0
    assert sorted(chunk_sizes(sim.step(now=10.0))) == ["new", "s0"]
    due_at(sim.sequences["new"], 10.5)  # before its first audio: due soon, far from paced
    assert sorted(chunk_sizes(sim.step(now=10.0))) == ["new", "s0"]


def test_a_lone_playing_stream_is_never_paced():
    """Nobody to share its steps with (its speech's next segment, due after it, is no one), and
    its client may be saving the audio, not playing it."""
    sim, (a, b) = paced_sim(2)
    runs_dry_at(a, 10.0 + 30.0), runs_dry_at(b, 10.0 + 30.0)
    assert sim.step(now=10.0).chunks == []
    due_at(b, 10.0 + 30.0)  # b plays after a: its first audio is due when a's runs out
    assert sim.scheduler.seconds_until_step(10.0) == 0.0 and chunk_sizes(sim.step(now=10.0)) == {"s0": 1, "s1": 1}
    sim.scheduler.abort("s1")
    assert sim.scheduler.seconds_until_step(10.0) == 0.0 and chunk_sizes(sim.step(now=10.0)) == {"s0": 1}


def test_without_pacing_or_streams_every_step_is_needed_or_none_is():
    sim, (a, b) = paced_sim(2, pace_slack_seconds=None)
    runs_dry_at(a, 10.0 + 30.0), runs_dry_at(b, 10.0 + 30.0)
    assert sim.scheduler.seconds_until_step(10.0) == 0.0 and chunk_sizes(sim.step(now=10.0)) == {"s0": 1, "s1": 1}
    sim.scheduler.abort("s0"), sim.scheduler.abort("s1")
    assert sim.scheduler.seconds_until_step(10.0) == math.inf


def test_prefill_is_sized_by_the_smallest_slack():
    cost = StepCostModel(prior=(0.0, 0.25, 0.125))  # exact in binary
    sim, (a, b) = decoding_sim(2, step_cost=cost, skip_slack_seconds=None)
    due_at(a, 2.0), due_at(b, 8.0)
    sim.add("prompt", prompt_len=40, outputs=5)
    out = sim.step(now=0.0)
    # Two rows take 0.5 s of the 2 s the closest listener holds: 1.5 s / 0.125 s = 12 tokens.
    assert chunk_sizes(out) == {"s0": 1, "s1": 1, "prompt": 12}
    assert cost.predict(2, 12) <= 2.0


def test_no_prefill_when_the_rows_alone_use_the_slack():
    cost = StepCostModel(prior=(0.0, 0.25, 0.125))
    sim, (a, b) = decoding_sim(2, step_cost=cost, skip_slack_seconds=None)
    due_at(a, 0.4), due_at(b, 8.0)
    sim.add("prompt", prompt_len=40, outputs=5)
    assert chunk_sizes(sim.step(now=0.0)) == {"s0": 1, "s1": 1}
    assert [s.request_id for s in sim.scheduler.waiting] == ["prompt"]


def test_a_stalled_stream_does_not_hold_prompts_back():
    cost = StepCostModel(prior=(0.0, 0.25, 0.125))
    sim, (a, b) = decoding_sim(2, step_cost=cost, skip_slack_seconds=None)
    runs_dry_at(a, -1.0), due_at(b, 8.0)  # a's listener already ran dry: only b's slack counts
    sim.add("prompt", prompt_len=100, outputs=5)
    assert chunk_sizes(sim.step(now=0.0))["prompt"] == 60  # (8 - 0.5) / 0.125, within the 62 left
