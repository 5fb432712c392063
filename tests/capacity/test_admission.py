"""Admission decisions with constructed clocks and step costs: start, wait, or refuse."""
from __future__ import annotations

import math
from dataclasses import dataclass

import pytest

from capacity.admission import Admission, Candidate, Overloaded
from capacity.config import CapacityConfig
from capacity.listener import Listener
from capacity.projection import StreamOutlook, Timeline, all_keep_slack
from capacity.step_cost import StepCostModel

STEP_AUDIO = 0.1  # seconds of audio per step and stream
FIRST_AUDIO_OUTPUTS = 3
ROW_SECONDS = 0.03  # a step costs 0.03 s per stream: three streams keep up, four do not
SAMPLE_RATE = 1000


@dataclass(eq=False)
class Req:
    """A request as admission sees it (`Candidate`): counts and a listener, nothing else."""

    request_id: str
    arrival: float
    prompt_tokens: int
    max_outputs: int
    listener: Listener
    outputs_after: int = 0
    outputs: int = 0
    computed_tokens: int = 0

    @property
    def uncomputed_prompt_tokens(self) -> int:
        return max(0, self.prompt_tokens - self.computed_tokens)


def make_request(rid: str, now: float = 0.0, outputs: int = 50, prompt_tokens: int = 10, delay: float = 1.0) -> Candidate:
    return Req(rid, now, prompt_tokens, outputs, Listener(SAMPLE_RATE, first_audio_due=now + delay))


def make_admission(max_num_seqs: int = 8, max_queue_delay: float | None = 1.0,
                   cost: tuple[float, float, float] = (0.0, ROW_SECONDS, 0.0)) -> Admission:
    # Never observed, so the prior is the cost: a constructed machine.
    return Admission(CapacityConfig(max_queue_delay=max_queue_delay), max_num_seqs, StepCostModel(prior=cost),
                     STEP_AUDIO, FIRST_AUDIO_OUTPUTS)


def playing(n: int, ahead: float, remaining: int) -> list[StreamOutlook]:
    return [StreamOutlook(ahead, remaining)] * n


def test_starts_when_every_projected_slack_stays_positive():
    admission = make_admission()
    assert admission.offer(make_request("new"), playing(2, 1.0, 100), now=0.0, continuation=False)
    assert admission.counts.admitted == 1 and not admission.queue


def test_waits_when_room_comes_before_its_deadline():
    admission = make_admission()
    # Four streams already outrun real time (0.12 s a step); they end within 5 steps (0.6 s).
    assert not admission.offer(make_request("new"), playing(4, 0.2, 5), now=0.0, continuation=False)
    assert [r.request_id for r in admission.queue] == ["new"] and admission.counts.queued == 1


@pytest.mark.parametrize("remaining", [50, 100])
def test_refused_at_once_when_room_comes_too_late_with_the_projected_drain_time(remaining):
    admission = make_admission()
    committed = playing(4, 0.2, remaining)
    with pytest.raises(Overloaded) as info:
        admission.offer(make_request("new"), committed, now=0.0, continuation=False)
    assert isinstance(info.value, Overloaded)
    # Room comes once the four streams have ended: not a constant, the projection's own time.
    drained = Timeline([remaining] * 4, admission.step_cost.predict, STEP_AUDIO).elapsed(remaining)
    assert info.value.retry_after == pytest.approx(drained)
    assert admission.counts.refused == 1 and not admission.queue


def test_retry_after_counts_only_the_streams_that_must_end():
    admission = make_admission()
    # Three of four end after 10 steps, one runs on (with audio to spare past them): one stream
    # must end to make room.
    committed = playing(3, 0.2, 10) + playing(1, 0.5, 400)
    with pytest.raises(Overloaded) as info:
        admission.offer(make_request("new", delay=0.5), committed, now=0.0, continuation=False)
    assert info.value.retry_after == pytest.approx(10 * 4 * ROW_SECONDS)


def test_queued_request_starts_once_streams_have_ended():
    admission = make_admission()
    admission.offer(make_request("new"), playing(4, 0.2, 5), now=0.0, continuation=False)
    started, refused = admission.poll(playing(1, 0.5, 100), now=0.6)
    assert [r.request_id for r in started] == ["new"] and not refused and not admission.queue
    assert admission.counts.admitted == 1


def test_queued_request_is_refused_once_it_could_no_longer_start_in_time():
    admission = make_admission()
    admission.offer(make_request("new"), playing(4, 0.2, 5), now=0.0, continuation=False)
    started, refused = admission.poll(playing(4, 0.2, 5), now=0.5)
    assert not started and not refused  # 0.5 + 3 steps of 5 streams (0.45 s) is still in time
    started, refused = admission.poll(playing(4, 0.2, 5), now=0.6)
    assert not started and [r.request_id for r, _ in refused] == ["new"]
    assert isinstance(refused[0][1], Overloaded) and refused[0][1].retry_after > 0
    assert not admission.queue and admission.counts.refused == 1


def test_arrivals_wait_behind_the_queue_in_order():
    admission = make_admission()
    admission.offer(make_request("first"), playing(4, 0.2, 5), now=0.0, continuation=False)
    assert not admission.offer(make_request("second"), playing(4, 0.2, 5), now=0.0, continuation=False)
    started, _ = admission.poll([], now=0.6)
    assert [r.request_id for r in started] == ["first", "second"]


def test_continuations_always_start():
    admission = make_admission()
    assert admission.offer(make_request("next-segment"), playing(8, 0.0, 1000), now=0.0, continuation=True)
    assert admission.counts.refused == 0


def test_without_a_queue_delay_everything_starts():
    admission = make_admission(max_queue_delay=None)
    assert admission.offer(make_request("any"), playing(8, 0.0, 1000), now=0.0, continuation=False)


def test_an_idle_engine_starts_even_what_cannot_meet_its_deadline():
    admission = make_admission(cost=(0.0, ROW_SECONDS, 1.0))  # a second per prompt token
    assert admission.offer(make_request("huge", prompt_tokens=100), [], now=0.0, continuation=False)


def test_running_slots_are_room_too():
    admission = make_admission(max_num_seqs=2, cost=(0.0, 0.001, 0.0))
    assert not admission.offer(make_request("third"), playing(2, 5.0, 20), now=0.0, continuation=False)


def test_a_withdrawn_request_leaves_the_queue():
    admission = make_admission()
    admission.offer(make_request("gone"), playing(4, 0.2, 5), now=0.0, continuation=False)
    assert admission.is_queued("gone")
    assert admission.withdraw("gone").request_id == "gone"
    assert admission.withdraw("gone") is None and not admission.queue


def test_capacity_is_the_streams_that_keep_up():
    assert make_admission().realtime_capacity() == 3
    assert make_admission(max_num_seqs=2).realtime_capacity() == 2


def test_outlook_and_deadline_read_the_listener():
    admission = make_admission(cost=(0.0, ROW_SECONDS, 0.01))
    request = make_request("r", now=10.0, outputs=50, prompt_tokens=10)
    request.outputs, request.computed_tokens = 20, 6  # 4 prompt tokens to go
    before = admission.outlook(request, 0.0, now=10.2)
    assert before == StreamOutlook(pytest.approx(0.8), 30, first_audio_steps=1, prefill_seconds=pytest.approx(0.04),
                                   generated_steps=20)
    assert request.listener.deadline == 11.0
    request.computed_tokens = 29
    # Its first audio left at 10.5; a second of audio is out, 0.3 s more exists but has not left.
    request.listener.received(SAMPLE_RATE, now=10.5)
    assert admission.outlook(request, 0.3, now=11.0) == StreamOutlook(pytest.approx(0.8), 30)
    assert request.listener.deadline == 11.5
    # A listener that ran dry plays on from the next audio; a first audio already late only has to come.
    assert admission.outlook(request, 0.3, now=20.0).ahead == pytest.approx(0.3)
    late = make_request("late", now=10.0)
    assert admission.outlook(late, 0.0, now=12.0).ahead == math.inf


def test_a_stream_must_keep_a_slow_steps_audio_in_hand():
    """Projected slack that stays positive but below one (slow) step is not enough: the listener's
    audio leaves in windows after a step, so such a stream would stall on the next slow one."""
    admission = make_admission()
    # With a newcomer each step takes 0.06 s and brings 0.1 s: this one's slack never falls
    # below 0.01 + 0.04, which is positive but under a step.
    thin = [StreamOutlook(0.01, 100)]
    with pytest.raises(Overloaded):  # and it runs for 3 s, past the newcomer's deadline
        admission.offer(make_request("new"), thin, now=0.0, continuation=False)
    admission = make_admission()
    assert admission.offer(make_request("new"), [StreamOutlook(0.2, 100)], now=0.0, continuation=False)


def test_scattered_steps_are_planned_at_their_mean_plus_one_overrun_not_each_at_its_tail():
    """Steps of three streams that take 0.09 s for 0.1 s of audio on average, one in five of them
    twice as long as the rest: three streams keep up, though every step charged at the slow
    ones' time (0.15 s) would have them fall behind."""
    admission = make_admission()
    for i in range(320):
        admission.step_cost.observe(3, 0, 0.15 if i % 5 == 0 else 0.075)
    committed = playing(2, 1.0, 100)
    newcomer = StreamOutlook(1.0, 50, FIRST_AUDIO_OUTPUTS)
    assert not all_keep_slack(committed + [newcomer], admission.step_cost.predict_tail, STEP_AUDIO)
    assert admission.offer(make_request("new"), committed, now=0.0, continuation=False)
    # Past what keeps up on average, the overrun changes nothing: four streams are refused.
    with pytest.raises(Overloaded):
        admission.offer(make_request("fourth"), playing(3, 1.0, 100), now=0.0, continuation=False)


def test_the_rest_of_a_speech_counts_against_room():
    """A first segment that fits alone but not with its speech's later segments: those arrive as
    continuations that admission cannot refuse, so it plans for them now."""
    committed = playing(3, 0.8, 60)  # three streams that keep up alone and end in 60 steps
    short = make_request("short", outputs=5)
    assert make_admission().offer(short, committed, now=0.0, continuation=False)
    long_speech = make_request("long", outputs=5)
    long_speech.outputs_after = 400
    with pytest.raises(Overloaded):
        make_admission().offer(long_speech, committed, now=0.0, continuation=False)


def test_seconds_until_room_is_when_a_typical_request_could_start():
    admission = make_admission()
    assert admission.seconds_until_room(playing(1, 1.0, 100), now=0.0) == 0.0
    full = playing(4, 0.2, 10)  # four streams already fall behind: room once they end
    assert admission.seconds_until_room(full, now=0.0) == pytest.approx(10 * 4 * ROW_SECONDS)


def test_room_now_counts_the_typical_requests_that_could_start_one_after_another():
    admission = make_admission()
    # Three streams keep up (0.09 s a step for 0.1 s of audio), four do not: beside one long
    # stream, two more of the usual size fit.
    assert admission.room_now(playing(1, 1.0, 1000), now=0.0) == 2
    assert admission.room_now(playing(3, 1.0, 1000), now=0.0) == 0
    admission.queue.append(make_request("waiting"))
    assert admission.room_now(playing(1, 1.0, 1000), now=0.0) == 0  # the queue goes first


def test_room_in_time_counts_the_typical_requests_that_would_wait_rather_than_be_refused():
    admission = make_admission()
    admission.typical.prompt_tokens, admission.typical.outputs = 10, 50
    # Four streams already fall behind, but end within 5 steps (0.6 s): no room now, yet typical
    # requests arriving now would start by their 1 s deadline; as many as `offer` would queue.
    ending = playing(4, 0.2, 5)
    assert admission.room_now(ending, now=0.0) == 0
    room = admission.room_in_time(ending, now=0.0)
    assert room >= 1
    for i in range(room):
        assert not admission.offer(make_request(f"r{i}", outputs=50), ending, now=0.0, continuation=False)
    with pytest.raises(Overloaded):
        admission.offer(make_request("one more", outputs=50), ending, now=0.0, continuation=False)


def test_room_in_time_is_none_when_the_streams_end_too_late_and_is_behind_the_queue():
    admission = make_admission()
    assert admission.room_in_time(playing(4, 0.2, 100), now=0.0) == 0
    assert admission.room_in_time(playing(1, 1.0, 1000), now=0.0) == admission.room_now(playing(1, 1.0, 1000), now=0.0)
    admission.queue.append(make_request("waiting"))
    assert admission.room_in_time(playing(1, 1.0, 1000), now=0.0) == 1  # two fit: one is the queue's
    assert make_admission(max_queue_delay=None).room_in_time(playing(3, 1.0, 10), now=0.0) == 5


def test_a_request_waits_while_no_state_slot_is_free_and_room_counts_the_slots():
    free = [0]
    admission = Admission(CapacityConfig(max_queue_delay=1.0), 8, StepCostModel(prior=(0.0, ROW_SECONDS, 0.0)),
                          STEP_AUDIO, FIRST_AUDIO_OUTPUTS, free_slots=lambda: free[0])
    assert not admission.offer(make_request("new"), [], now=0.0, continuation=False)
    assert [r.request_id for r in admission.queue] == ["new"] and admission.room_now([], 0.0) == 0
    free[0] = 1
    started, refused = admission.poll([], now=0.1)
    assert [r.request_id for r in started] == ["new"] and not refused
    assert admission.room_now([], 0.1) == 1


def test_the_short_stand_in_is_the_lower_quartile_of_recent_sizes():
    """A few long speeches pull the mean far above most requests; the short stand-in does not
    move with them."""
    admission = make_admission()
    assert admission.typical.request(0.0, 1.0, short=True).max_outputs == admission.typical.request(0.0, 1.0).max_outputs
    for i in range(40):
        outputs = 1000 if i % 4 == 3 else 40  # a paragraph after every three sentences
        admission.typical.observe(make_request(f"r{i}", outputs=outputs, prompt_tokens=outputs // 4))
    short, usual = admission.typical.request(0.0, 1.0, short=True), admission.typical.request(0.0, 1.0)
    assert (short.max_outputs, short.prompt_tokens) == (40, 10)
    assert usual.max_outputs > 200


def test_the_published_room_counts_short_requests_where_usual_ones_no_longer_fit():
    admission = make_admission()
    for i in range(40):
        admission.typical.observe(make_request(f"r{i}", outputs=1000 if i % 4 == 3 else 5))
    # Two streams playing 0.3 s ahead (three streams keep up, four do not): one more stream of
    # the usual (long) size fits, while short ones end soon enough for two.
    room = admission.room(playing(2, 0.3, 60), now=0.0)
    assert (room.in_time, room.short_in_time, room.in_time_for_short) == (1, 2, 2)
