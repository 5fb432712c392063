"""The core loop (engine/core_loop.py) driven directly: an in-memory `receive` that plays a
script of command batches and a `send` that records every batch of replies, around a tiny-random
core on a StepClock. No thread, no process: the loop runs in the test, and the clock moves only
when the model runs or the script moves it."""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Callable

import pytest

from capacity.config import CapacityConfig
from engine.core_loop import STATS_INTERVAL_S, CoreLoop, run_core_guarded
from engine.messages import (AbortRequest, AddRequest, CoreFailed, CoreReady, PauseRequest, Rejected, Shutdown,
                             StatsUpdate)
from engine.outputs import AudioChunk, EngineStats
from model.sampling import SamplingParams

# A script entry: a batch of commands, a callable that returns one when the loop asks (it may
# look at the core, or move the clock, first), or WHILE_WORKING: empty batches while the core
# has work, then the next entry.
WHILE_WORKING = object()
MAX_CALLS = 20_000


@dataclass
class Inbox:
    """`receive`: each call answers the script's next entry and records (timeout, has_work) as
    the loop asked; past the end of the script, Shutdown."""

    core: object
    script: list
    calls: list[tuple[float | None, bool]] = field(default_factory=list)

    def __call__(self, timeout: float | None) -> list:
        self.calls.append((timeout, self.core.has_work))
        assert len(self.calls) < MAX_CALLS, "the loop never finished its script"
        while self.script:
            entry = self.script[0]
            if entry is WHILE_WORKING:
                if self.core.has_work:
                    return []
                self.script.pop(0)
                continue
            self.script.pop(0)
            return list(entry() if callable(entry) else entry)
        return [Shutdown()]


@dataclass
class Sent:
    """One batch of replies: after which receive call, at what time of the core's clock, and a
    copy of any stats it carried as they stood then (the core mutates its stats in place)."""

    after_call: int
    at: float
    messages: list
    stats: list[EngineStats]


@dataclass
class Outbox:
    core: object
    inbox: Inbox
    batches: list[Sent] = field(default_factory=list)

    def __call__(self, messages: list) -> None:
        assert isinstance(messages, list) and messages, "send takes a non-empty batch"
        stats = [copy.deepcopy(m.stats) for m in messages if isinstance(m, (CoreReady, StatsUpdate))]
        self.batches.append(Sent(len(self.inbox.calls), self.core.clock(), list(messages), stats))

    def of(self, kind) -> list:
        return [m for batch in self.batches for m in batch.messages if isinstance(m, kind)]

    def chunks(self, request_id: str) -> list[AudioChunk]:
        return [m for m in self.of(AudioChunk) if m.request_id == request_id]


def reported_after(outbox: Outbox) -> list[int]:
    """After which receive calls a stats report went out (CoreReady's aside)."""
    return [b.after_call for b in outbox.batches if b.stats and not isinstance(b.messages[0], CoreReady)]


def run_loop(core, script: list) -> tuple[Inbox, Outbox]:
    inbox = Inbox(core, list(script))
    outbox = Outbox(core, inbox)
    CoreLoop(core, inbox, outbox).run()
    return inbox, outbox


@pytest.fixture
def add(tiny_frontend) -> Callable[..., AddRequest]:
    def make(request_id: str, max_tokens: int = 70, seed: int = 1, **fields) -> AddRequest:
        prompt = tiny_frontend.prepare(f"Sentence {request_id}.", "tara")
        return AddRequest(request_id, prompt, SamplingParams(temperature=0.8, seed=seed, max_tokens=max_tokens),
                          **fields)

    return make


def test_ready_comes_first_with_a_room_estimate(make_core):
    core = make_core(num_blocks=256, max_num_seqs=4)
    inbox, outbox = run_loop(core, [[Shutdown()]])
    ready = outbox.batches[0].messages
    assert len(ready) == 1 and isinstance(ready[0], CoreReady)
    assert (ready[0].sample_rate, ready[0].limits) == (core.sample_rate, core.limits)
    # Sent before any command was received, and already with the room an idle engine has.
    assert outbox.batches[0].after_call == 0
    room = outbox.batches[0].stats[0].room
    assert room.now > 0 and room.in_time >= room.now and room.taken_at == core.clock()
    assert core.stats.steps == 0


def test_an_abort_that_comes_with_its_add_ends_it_within_one_step_with_one_final_chunk(make_core, add):
    core = make_core(num_blocks=256, max_num_seqs=4)
    inbox, outbox = run_loop(core, [[add("r1"), AbortRequest("r1")], [Shutdown()]])
    chunks = outbox.chunks("r1")
    assert len(chunks) == 1 and chunks[0].finished and chunks[0].finish_reason == "abort"
    assert chunks[0].pcm.size == 0
    # Both commands were handled before the one step, which sent the final chunk.
    assert core.stats.steps == 1
    assert [b.after_call for b in outbox.batches if any(isinstance(m, AudioChunk) for m in b.messages)] == [1]
    assert not core.has_work and core.kv_manager.num_free_blocks == core.kv_manager.num_blocks


def test_commands_are_handled_before_the_next_step(make_core, add):
    core = make_core(num_blocks=256, max_num_seqs=4)
    steps_at_abort = []

    def abort_now():
        steps_at_abort.append(core.stats.steps)
        return [AbortRequest("r1")]

    script = [[add("r1", max_tokens=700)], [], [], [], abort_now, WHILE_WORKING, [Shutdown()]]
    inbox, outbox = run_loop(core, script)
    chunks = outbox.chunks("r1")
    # It was running (4 steps in), and the step right after the abort ended it: one final chunk.
    assert steps_at_abort == [4] and core.stats.steps == 5
    assert chunks[-1].finished and chunks[-1].finish_reason == "abort"
    assert [c.finished for c in chunks].count(True) == 1
    assert core.kv_manager.num_free_blocks == core.kv_manager.num_blocks


def test_an_add_passes_whole_and_a_duplicate_id_is_rejected(make_core, add):
    core = make_core(num_blocks=256, max_num_seqs=4, capacity=CapacityConfig(max_queue_delay=1.0))
    seen = {}

    def look():
        request = core.requests.get("r1")
        seen.update(due=request.listener.first_audio_due, outputs_after=request.outputs_after,
                    priority=request.seq.priority)
        return []

    arrived = core.clock() - 0.25
    script = [[add("r1", max_tokens=21, priority=3, outputs_after=140, arrived=arrived), add("r1", seed=2)], look,
              WHILE_WORKING, [Shutdown()]]
    inbox, outbox = run_loop(core, script)
    # Every field of the message reached the core, not only the id, prompt and params.
    assert seen == dict(due=pytest.approx(arrived + 1.0), outputs_after=140, priority=3)
    rejected = outbox.of(Rejected)
    assert [(r.request_id, r.code) for r in rejected] == [("r1", "duplicate_request_id")]
    # The first one is unharmed by its duplicate's refusal.
    chunks = outbox.chunks("r1")
    assert [c.finished for c in chunks].count(True) == 1 and chunks[-1].finish_reason in ("stop", "length")


def test_a_refused_add_is_a_rejected_reply_and_the_loop_goes_on(make_core, add):
    core = make_core(num_blocks=256, max_num_seqs=4, capacity=CapacityConfig(max_queue_delay=1.0))
    # A speech that came 5 s ago cannot have its first audio in time behind another: overloaded.
    script = [[add("first", max_tokens=14), add("late", max_tokens=14, arrived=core.clock() - 5.0)], WHILE_WORKING]
    inbox, outbox = run_loop(core, script)
    rejected = outbox.of(Rejected)
    assert [(r.request_id, r.code) for r in rejected] == [("late", "overloaded")]
    assert rejected[0].retry_after is not None and rejected[0].retry_after >= 0
    assert outbox.chunks("first")[-1].finished and not outbox.chunks("late")


def test_stats_go_out_every_stats_interval_of_the_cores_clock(make_core):
    core = make_core(num_blocks=256, max_num_seqs=4)
    clock = core.clock

    def advance(seconds: float):
        def entry():
            clock.advance(seconds)
            return []
        return entry

    short = STATS_INTERVAL_S / 4  # binary fractions: the sums below are exact
    script = [[], [], advance(STATS_INTERVAL_S - short), advance(short), [], advance(3 * STATS_INTERVAL_S), []]
    inbox, outbox = run_loop(core, script)
    with_stats = reported_after(outbox)
    # The first iteration reports at once; then only once the clock has moved a whole interval
    # (not a quarter of one before; a jump of three intervals is one report, not three).
    assert with_stats == [1, 4, 6]
    assert all(isinstance(m, StatsUpdate) for b in outbox.batches[1:] for m in b.messages)


def test_stats_while_stepping_keep_to_the_interval(make_core, add):
    # Every step takes three steps' audio (37 ms): slower than real time, and a few seconds in all.
    core = make_core(num_blocks=256, max_num_seqs=4, step_cost=3.0, row_cost=0.0)
    step = 3.0 / core.limits.outputs_per_second
    start = core.clock()
    inbox, outbox = run_loop(core, [[add("r1")], WHILE_WORKING])
    times = [b.at for b in outbox.batches if any(isinstance(m, StatsUpdate) for m in b.messages)]
    elapsed = core.clock() - start
    assert elapsed > 8 * STATS_INTERVAL_S  # long enough to count
    gaps = [later - earlier for earlier, later in zip(times, times[1:])]
    # A report as soon as a step ends an interval after the last one: never sooner, at most a step later.
    assert all(STATS_INTERVAL_S <= gap < STATS_INTERVAL_S + step * 1.001 for gap in gaps)
    assert len(times) == pytest.approx(elapsed / STATS_INTERVAL_S, abs=1.5)
    # Each report carries the room as it stood when it was sent.
    for batch in outbox.batches:
        for stats in batch.stats:
            assert stats.room.taken_at == batch.at


def test_it_waits_for_commands_only_when_the_core_has_no_work(make_core, add):
    core = make_core(num_blocks=256, max_num_seqs=4)
    script = [[], [add("r1", max_tokens=21)], WHILE_WORKING, [PauseRequest("r2", True)], [add("r2", max_tokens=14)], [],
              [PauseRequest("r2", True)], [], [PauseRequest("r2", False)], WHILE_WORKING, [Shutdown()]]
    inbox, outbox = run_loop(core, script)
    assert inbox.calls and all(timeout == (0.0 if has_work else STATS_INTERVAL_S) for timeout, has_work in inbox.calls)
    waits = [has_work for _, has_work in inbox.calls]
    assert waits.count(True) > 10 and waits.count(False) >= 4
    # A paused request alone is no work: the loop waited, and it still finished once resumed.
    assert outbox.chunks("r2")[-1].finished and outbox.chunks("r1")[-1].finished


def test_shutdown_returns_at_once_leaving_the_rest_of_its_batch(make_core, add):
    core = make_core(num_blocks=256, max_num_seqs=4)
    inbox, outbox = run_loop(core, [[add("r1")], [], [Shutdown(), add("r2")], [add("r3")]])
    assert len(inbox.calls) == 3  # never asked again
    assert "r2" not in core.requests and "r3" not in core.requests and "r1" in core.requests
    assert core.stats.steps == 2


def test_a_core_that_raises_is_reported_as_core_failed(make_core, add, monkeypatch):
    core = make_core(num_blocks=256, max_num_seqs=4)

    def broken_step():
        raise RuntimeError("the step broke")

    monkeypatch.setattr(core, "step", broken_step)
    inbox = Inbox(core, [[add("r1")], [add("r2")]])
    outbox = Outbox(core, inbox)
    run_core_guarded(lambda: core, inbox, outbox)  # returns: the failure is reported, not raised
    assert isinstance(outbox.batches[0].messages[0], CoreReady)
    failed = outbox.batches[-1].messages
    assert len(failed) == 1 and isinstance(failed[0], CoreFailed)
    assert "RuntimeError: the step broke" in failed[0].message and "Traceback" in failed[0].message
    assert len(inbox.calls) == 1  # the loop ended with the failure


def test_a_core_that_fails_to_build_or_an_unknown_command_is_reported_as_core_failed(make_core):
    sent: list = []

    def build():
        raise ValueError("no such model")

    run_core_guarded(build, lambda timeout: [Shutdown()], sent.extend)
    assert len(sent) == 1 and isinstance(sent[0], CoreFailed) and "no such model" in sent[0].message

    core = make_core(num_blocks=256, max_num_seqs=4)
    inbox = Inbox(core, [["not a command"]])
    outbox = Outbox(core, inbox)
    run_core_guarded(lambda: core, inbox, outbox)
    failed = outbox.of(CoreFailed)
    assert len(failed) == 1 and "unknown engine command" in failed[0].message


def test_a_report_follows_every_batch_that_brings_requests(make_core, add):
    """The API's early refusal spends the last report's room one request at a time: a burst of
    arrivals must not be judged on a report that predates them all."""
    core = make_core(num_blocks=256, max_num_seqs=4)
    clock = core.clock
    short = STATS_INTERVAL_S / 8

    def advance():
        clock.advance(short)
        return []

    inbox, outbox = run_loop(core, [[], advance, [add("r1")], advance, [add("r2"), add("r3")], [], [Shutdown()]])
    with_stats = reported_after(outbox)
    assert with_stats == [1, 3, 5]  # the first iteration, then each batch with adds
    reports = [stats for batch in outbox.batches for stats in batch.stats]
    assert reports[-1].room.taken_at > reports[-2].room.taken_at  # taken after the requests were admitted


def test_reports_on_arrival_take_a_bounded_share_of_the_cores_time(make_core, add, monkeypatch):
    """Each report projects every stream: arrivals every step must not make every step pay one
    (with hundreds of streams on a GPU). A refresh taking `cost` waits cost / share after the last."""
    from engine.core_loop import ARRIVAL_REPORT_SHARE

    core = make_core(num_blocks=256, max_num_seqs=4)
    clock, refresh = core.clock, core.refresh_room_estimate
    cost = 0.004
    monkeypatch.setattr(core, "refresh_room_estimate", lambda: (refresh(), clock.advance(cost)))
    assert cost / ARRIVAL_REPORT_SHARE < STATS_INTERVAL_S

    def later(*requests):
        def entry():
            clock.advance(cost / ARRIVAL_REPORT_SHARE)
            return list(requests)
        return entry

    script = [[], later(add("r1")), [add("r2")], later(add("r3")), [Shutdown()]]
    inbox, outbox = run_loop(core, script)
    with_stats = reported_after(outbox)
    # r2 came one step after r1's report, far sooner than cost / share: no report of its own.
    assert with_stats == [1, 2, 4]
