"""Admission in the engine core on tiny-random, end to end on a `StepClock` whose steps cost a
fixed time per stream: the core measures those steps as it would a real machine's, and admits,
queues and refuses by them (nothing about its cost model is patched)."""
from __future__ import annotations

import numpy as np
import pytest

from capacity.config import CapacityConfig
from engine.errors import RequestRejected
from model.sampling import SamplingParams

from .conftest import drain, started

SAMPLES_PER_FRAME = 2048
OUTPUTS = 70  # 10 frames of 7 tokens
STEP_AUDIO = 1 / 82.03125  # tiny-random's: seconds of audio per step and stream


def per_stream(seconds: float) -> dict:
    """make_core's clock costs for steps of `seconds` per decoding stream (and nothing else)."""
    return dict(step_cost=0.0, row_cost=seconds / STEP_AUDIO)


def add(core, tiny_frontend, rid: str, continuation: bool = False, **options) -> None:
    params = SamplingParams(temperature=0.8, seed=int(rid[1:]), max_tokens=OUTPUTS)
    core.add_request(rid, tiny_frontend.prepare(f"Sentence {rid}.", "tara"), params, continuation=continuation,
                     **options)


def test_the_clock_is_the_machine_admission_plans_with(make_core):
    # 0.005 s per stream against 1/82 s of audio a step: two streams keep up, three do not.
    core = make_core(num_blocks=256, max_num_seqs=4, **per_stream(0.005))
    assert core.limits.outputs_per_second == pytest.approx(1 / STEP_AUDIO)
    assert core.admission.realtime_capacity() == 2
    assert core.step_cost.predict(2) == pytest.approx(0.01, rel=0.15)  # learned: the prior still weighs a little
    assert core.step_cost.predict(2) < STEP_AUDIO < core.step_cost.predict(3)


def test_a_burst_beyond_capacity_is_refused_and_what_starts_completes(make_core, tiny_frontend):
    # Two slots; two streams step faster than real time (0.01 s per step for 1/82 s of audio).
    core = make_core(num_blocks=256, max_num_seqs=2, capacity=CapacityConfig(max_queue_delay=2.0),
                     **per_stream(0.005))
    refused: dict[str, RequestRejected] = {}
    for i in range(6):
        try:
            add(core, tiny_frontend, f"r{i}")
        except RequestRejected as exc:
            refused[f"r{i}"] = exc
    # r0, r1 start; r2, r3 wait for the slots that free when r0 and r1 end (70 steps of two
    # streams: 0.7 s, within their 2 s); r4 and r5 could not start before their deadline.
    assert sorted(r.request_id for r in core.requests.values()) == ["r0", "r1"]
    assert [r.request_id for r in core.admission.queue] == ["r2", "r3"]
    assert sorted(refused) == ["r4", "r5"]
    for exc in refused.values():
        assert exc.code == "overloaded"
        assert exc.retry_after == pytest.approx(0.7, rel=0.02)  # when r0 and r1 will have ended
    streams = {r.request_id: r.stream for r in [*core.requests.values(), *core.admission.queue]}
    arrived = core.clock()
    chunks, late = drain_with_refusals(core)
    # The steps took what admission planned with: the waiting requests started in time, and
    # finished whole.
    assert not late and sorted(chunks) == ["r0", "r1", "r2", "r3"]
    for rid, got in chunks.items():
        assert [c.finished for c in got].count(True) == 1 and got[-1].finish_reason in ("stop", "length")
        audio = np.concatenate([c.pcm for c in got])
        assert len(audio) == streams[rid].num_frames * SAMPLES_PER_FRAME
    for rid in ("r2", "r3"):
        # They waited (for r0 and r1 to end) but had their first audio by their deadline.
        metrics = chunks[rid][-1].metrics
        assert metrics.queue_time > 0.5 and metrics.time_to_first_audio < 2.0
    assert core.clock() - arrived > 1.0  # two rounds of two streams: the clock ran the steps
    assert core.kv_manager.num_free_blocks == core.kv_manager.num_blocks
    stats = core.stats
    assert (stats.requests_refused, stats.requests_queued, stats.requests_admitted) == (2, 2, 4)
    assert stats.realtime_capacity == 2


def test_requests_that_wait_too_long_for_room_are_refused_once_without_audio(make_core, tiny_frontend):
    """A queued request that the steps show could no longer start in time is refused at a step
    (`take_refusals`), not left waiting: here the machine is slower than admission planned."""
    core = make_core(num_blocks=256, max_num_seqs=1, capacity=CapacityConfig(max_queue_delay=1.5),
                     **per_stream(0.005))
    add(core, tiny_frontend, "r0")
    add(core, tiny_frontend, "r1")  # r0 ends in 70 steps (0.35 s): r1 waits, then starts in time
    assert core.admission.is_queued("r1")
    core.clock.advance(1.4)  # the machine stalls before the first step: r1 could not start by its deadline
    chunks, late = drain_with_refusals(core)
    assert list(late) == ["r1"] and late["r1"].code == "overloaded" and late["r1"].retry_after >= 0
    assert "r1" not in chunks and chunks["r0"][-1].finish_reason in ("stop", "length")
    assert core.stats.requests_refused == 1
    assert core.kv_manager.num_free_blocks == core.kv_manager.num_blocks


def test_continuations_start_even_when_the_engine_is_full(make_core, tiny_frontend):
    core = make_core(num_blocks=256, max_num_seqs=2, capacity=CapacityConfig(max_queue_delay=0.5),
                     **per_stream(0.02))  # slower than real time even for one stream
    add(core, tiny_frontend, "r0")
    with pytest.raises(RequestRejected):
        add(core, tiny_frontend, "r1")
    add(core, tiny_frontend, "r2", continuation=True)
    assert sorted(r.request_id for r in core.requests.values()) == ["r0", "r2"]
    chunks = drain(core)
    assert all(got[-1].finish_reason in ("stop", "length") for got in chunks.values())


def test_aborting_a_waiting_request_ends_it_with_one_final_chunk(make_core, tiny_frontend):
    core = make_core(num_blocks=256, max_num_seqs=1, capacity=CapacityConfig(max_queue_delay=5.0),
                     **per_stream(0.005))
    add(core, tiny_frontend, "r0")
    add(core, tiny_frontend, "r1")
    assert core.admission.is_queued("r1")
    core.abort_request("r1")
    chunks = drain(core)
    assert [c.finish_reason for c in chunks["r1"]] == ["abort"]
    assert chunks["r0"][-1].finish_reason in ("stop", "length")
    assert core.kv_manager.num_free_blocks == core.kv_manager.num_blocks


def test_a_duplicate_of_a_waiting_request_is_refused(make_core, tiny_frontend):
    core = make_core(num_blocks=256, max_num_seqs=1, capacity=CapacityConfig(max_queue_delay=5.0),
                     **per_stream(0.005))
    add(core, tiny_frontend, "r0")
    add(core, tiny_frontend, "r1")
    with pytest.raises(RequestRejected) as info:
        add(core, tiny_frontend, "r1")
    assert info.value.code == "duplicate_request_id"


def drain_with_refusals(core, max_steps: int = 20_000) -> tuple[dict, dict]:
    """Steps until idle; returns each request's chunks and the requests refused meanwhile."""
    chunks: dict[str, list] = {}
    late: dict[str, RequestRejected] = {}
    for _ in range(max_steps):
        if not core.has_work:
            return chunks, late
        for chunk in core.step():
            chunks.setdefault(chunk.request_id, []).append(chunk)
        late.update(core.take_refusals())
    raise AssertionError("engine did not become idle")


def test_a_speech_that_waited_for_its_prompt_is_due_from_its_arrival_and_counted_as_lead(make_core, tiny_frontend):
    """The API says when the speech came: preparing its prompt spent part of its first-audio
    budget, so its deadline counts from then, and admission's typical newcomer learns that lead."""
    core = make_core(num_blocks=256, max_num_seqs=4, capacity=CapacityConfig(max_queue_delay=1.0),
                     **per_stream(0.001))
    arrived = core.clock() - 0.3
    params = SamplingParams(temperature=0.8, seed=1, max_tokens=OUTPUTS)
    core.add_request("r1", tiny_frontend.prepare("Sentence one.", "tara"), params, arrived=arrived)
    r1 = started(core, "r1")
    assert r1.listener.first_audio_due == pytest.approx(arrived + 1.0) and r1.arrival == pytest.approx(arrived + 0.3)
    lead = core.admission.typical.lead
    assert lead == pytest.approx(0.1 * (r1.arrival - arrived))
    # A later segment (a continuation) says nothing of a new speech's wait; a new speech that
    # came without waiting pulls the mean lead down.
    add(core, tiny_frontend, "r2", continuation=True)
    assert core.admission.typical.lead == lead
    add(core, tiny_frontend, "r3")
    assert core.admission.typical.lead == pytest.approx(0.9 * lead, abs=1e-4)
    typical = core.admission.typical.request(10.0, 1.0)
    assert typical.listener.first_audio_due == pytest.approx(11.0 - core.admission.typical.lead)
    # A speech that came too long ago to have its first audio in time is refused at once.
    with pytest.raises(RequestRejected) as info:
        add(core, tiny_frontend, "r4", arrived=core.clock() - 1.5)
    assert info.value.code == "overloaded"
