"""A speech's later segment in the engine core (tiny-random): its listener hears it only once the
segment before it has played out, so its first-audio deadline, playback and slack count from then,
and the rest of the speech is projected on it alone."""
from __future__ import annotations

import numpy as np

from capacity.config import CapacityConfig
from model.sampling import SamplingParams

from .conftest import drain, started

OUTPUTS = 70  # 10 frames of 7 tokens


def params(seed: int) -> SamplingParams:
    return SamplingParams(temperature=0.8, seed=seed, max_tokens=OUTPUTS)


def test_a_following_segment_is_due_when_the_audio_before_it_runs_out(make_core, tiny_frontend):
    core = make_core(num_blocks=256, max_num_seqs=4, capacity=CapacityConfig(max_queue_delay=1.0))
    sent: dict[str, int] = {"a": 0, "b": 0}

    def step() -> None:
        for chunk in core.step():
            sent[chunk.request_id] += chunk.pcm.size

    core.add_request("a", tiny_frontend.prepare("First sentence.", "tara"), params(1), outputs_after=2 * OUTPUTS)
    a = started(core, "a")
    while a.listener.first_audio_at is None:
        step()
    # a itself follows a segment already gone whose audio plays 5 s more (as the core leaves a
    # follower once its predecessor's audio is all out): its listener is busy well past b's start.
    a.listener.plays_after = core.clock() + 5.0
    core.add_request("b", tiny_frontend.prepare("Second sentence.", "tara"), params(2), continuation=True,
                     outputs_after=OUTPUTS, follows="a")
    b = started(core, "b")
    assert b.follows is a and a.outputs_after == 0 and b.outputs_after == OUTPUTS
    # Before its first audio, b is due when a's audio out so far runs out (5 s on), not a second
    # after its arrival (it is never due sooner than that, as a new speech is).
    assert b.listener.first_audio_due == b.listener.plays_after == a.listener.runs_dry_at > b.arrival + 1.0
    assert b.seq.deadline == b.listener.first_audio_due  # what the scheduler orders by
    while b.listener.first_audio_at is None:
        step()
        assert b.listener.plays_after == a.listener.runs_dry_at
    # a's listener is still busy when b's first audio leaves: b's playback (its slack, its
    # deadline) starts only once a's audio has played.
    listener = b.listener
    assert listener.first_audio_at < listener.plays_after == listener.playback_start
    assert b.seq.deadline == listener.runs_dry_at == listener.playback_start + listener.received_seconds
    assert listener.runs_dry_at > a.listener.runs_dry_at
    assert listener.slack(core.clock()) > 4.0  # a's 5 s still to play, then b's own audio
    chunks = drain(core)
    # Once a's audio is all out its end is final: b keeps it and lets a go.
    assert b.follows is None and b.listener.plays_after == a.listener.runs_dry_at
    for request in (a, b):
        got = chunks[request.request_id]
        assert [c.finished for c in got].count(True) == 1
        audio = np.concatenate([c.pcm for c in got])
        assert audio.size > 0
        # Its listener heard every sample sent, no more.
        assert request.listener.samples_received == sent[request.request_id] + audio.size


def test_a_following_segment_whose_predecessor_is_gone_counts_from_its_own_first_audio(make_core, tiny_frontend):
    core = make_core(num_blocks=256, max_num_seqs=4)
    core.add_request("b", tiny_frontend.prepare("Second sentence.", "tara"), params(2), continuation=True,
                     follows="ended-long-ago")
    b = started(core, "b")
    assert b.follows is None and b.listener.plays_after is None
    while b.listener.first_audio_at is None:
        core.step()
    assert b.listener.playback_start == b.listener.first_audio_at


def test_a_following_segment_is_never_due_sooner_than_a_new_speech(make_core, tiny_frontend):
    core = make_core(num_blocks=256, max_num_seqs=4, capacity=CapacityConfig(max_queue_delay=1.0))
    core.add_request("a", tiny_frontend.prepare("First sentence.", "tara"), params(1))
    a = started(core, "a")
    while a.listener.first_audio_at is None:
        core.step()
    core.add_request("b", tiny_frontend.prepare("Second sentence.", "tara"), params(2), continuation=True,
                     follows="a")
    b = started(core, "b")
    # a's audio out so far (its first chunk) runs out sooner than a second: most of a is to come.
    assert b.listener.plays_after == a.listener.runs_dry_at < b.arrival + 1.0 == b.listener.first_audio_due
