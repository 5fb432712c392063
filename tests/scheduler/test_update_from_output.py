"""The post-step update: the scheduler alone counts outputs and ends sequences at their limit."""
from __future__ import annotations

from scheduler import SequenceStatus

from .conftest import Simulator


def test_one_output_per_emitting_chunk_and_none_for_a_prompt_chunk():
    sim = Simulator(num_blocks=64, max_num_seqs=4, max_num_batched_tokens=4)
    seq = sim.add("a", prompt_len=10, outputs=5)
    counts = []
    for _ in range(4):  # prompt chunks of 4, 4 and 2 tokens, then one decode step
        sim.step()
        counts.append(seq.num_output_tokens)
    assert counts == [0, 0, 1, 2]
    assert seq.num_computed_tokens == 11 and seq.num_tokens == 12


def test_a_sequence_ends_at_its_limit_and_frees_its_blocks():
    sim = Simulator(num_blocks=64, max_num_seqs=4, max_num_batched_tokens=16)
    seq = sim.add("a", prompt_len=6, outputs=3)
    other = sim.add("b", prompt_len=6, outputs=10)
    results = [sim.scheduler.update_from_output(sim.scheduler.schedule()) for _ in range(3)]
    assert results == [{}, {}, {"a": "length"}]
    assert seq.num_output_tokens == 3 and seq.status is SequenceStatus.FINISHED
    assert sim.kv.num_request_blocks("a") == 0
    assert [c.seq for c in sim.scheduler.schedule().chunks] == [other]


def test_a_stop_ends_the_sequence_and_counts_its_output():
    sim = Simulator(num_blocks=64, max_num_seqs=4, max_num_batched_tokens=16)
    seq = sim.add("a", prompt_len=4, outputs=1)
    sim.add("b", prompt_len=4, outputs=10)
    # The limit and the stop arrive together: the family's stop is the reason.
    assert sim.scheduler.update_from_output(sim.scheduler.schedule(), {"a", "b"}) == {"a": "stop", "b": "stop"}
    assert seq.num_output_tokens == 1 and sim.kv.num_free_blocks == 64


def test_a_sequence_ended_during_the_step_is_not_counted():
    sim = Simulator(num_blocks=64, max_num_seqs=4, max_num_batched_tokens=16)
    failed = sim.add("a", prompt_len=4, outputs=10)
    ok = sim.add("b", prompt_len=4, outputs=10)
    out = sim.scheduler.schedule()
    sim.scheduler.finish("a")  # the engine ends a request whose output failed
    assert sim.scheduler.update_from_output(out, {"a"}) == {}
    assert failed.num_output_tokens == 0 and ok.num_output_tokens == 1
    assert sim.kv.num_request_blocks("a") == 0


def test_a_preempted_sequence_keeps_its_count_and_recomputation_adds_none():
    # 4 blocks of 4 tokens for two growing sequences: "b" is preempted, then recomputes its
    # prompt and outputs 2 tokens at a time; only the chunk that reaches its end emits.
    sim = Simulator(num_blocks=4, max_num_seqs=2, max_num_batched_tokens=16, max_prefill_chunk=2)
    sim.add("a", prompt_len=4, outputs=9)
    b = sim.add("b", prompt_len=4, outputs=9)
    recomputed = False
    while b.status is not SequenceStatus.FINISHED:
        before = b.num_output_tokens
        out = sim.step()
        chunk = next((c for c in out.chunks if c.seq is b), None)
        emitted = chunk is not None and chunk.produces_output
        assert b.num_output_tokens == before + emitted
        recomputed |= chunk is not None and not emitted and b.num_preemptions > 0 and before > 0
    assert b.num_preemptions > 0 and recomputed
    assert b.num_output_tokens == 9 and sim.finished.count("b") == 1
    assert sim.kv.num_free_blocks == 4
