"""A speech's later segment in the engine core (tiny-random): its listener hears it only once the
segment before it has played out, so its first-audio deadline, playback and slack count from then,
and the rest of the speech is projected on it alone."""
from __future__ import annotations

import time

import numpy as np

from model.sampling import SamplingParams

from .conftest import drain

OUTPUTS = 70  # 10 frames of 7 tokens


def params(seed: int) -> SamplingParams:
    return SamplingParams(temperature=0.8, seed=seed, max_tokens=OUTPUTS)


def test_a_following_segment_is_due_when_the_audio_before_it_runs_out(make_core, tiny_frontend):
    core = make_core(num_blocks=256, max_num_seqs=4, max_queue_delay=1.0)
    rate = core.sample_rate
    core.add_request("a", tiny_frontend.prepare("First sentence.", "tara"), params(1), outputs_after=2 * OUTPUTS)
    a = core.requests["a"]
    while a.first_audio is None:
        core.step()
    # a itself follows a segment already gone whose audio plays 5 s more (as the core leaves a
    # follower once its predecessor's audio is all out): its listener is busy well past b's start.
    a.plays_after = time.monotonic() + 5.0
    core.audio.play_after("a", a.plays_after)
    core.add_request("b", tiny_frontend.prepare("Second sentence.", "tara"), params(2), continuation=True,
                     outputs_after=OUTPUTS, follows="a")
    b = core.requests["b"]
    assert b.follows is a and a.outputs_after == 0 and b.outputs_after == OUTPUTS
    # Before its first audio, b is due when a's audio out so far runs out (5 s on), not a second
    # after its arrival (it is never due sooner than that, as a new speech is).
    assert b.first_audio_deadline == b.plays_after == a.runs_dry_at(rate) > b.arrival + 1.0
    while b.first_audio is None:
        core.step()
        assert b.plays_after == a.runs_dry_at(rate)
    # a's listener is still busy when b's first audio leaves: b's playback (its slack, its
    # deadline) starts only once a's audio has played.
    playback = core.audio.playback("b")
    assert b.first_audio < b.plays_after <= playback.start
    assert b.seq.deadline == playback.runs_dry_at == b.runs_dry_at(rate) > a.runs_dry_at(rate)
    chunks = drain(core)
    # Once a's audio is all out its end is final: b keeps it and lets a go.
    assert b.follows is None and b.plays_after == a.runs_dry_at(rate)
    for rid in ("a", "b"):
        assert [c.finished for c in chunks[rid]].count(True) == 1
        assert np.concatenate([c.pcm for c in chunks[rid]]).size > 0


def test_a_following_segment_whose_predecessor_is_gone_counts_from_its_own_first_audio(make_core, tiny_frontend):
    core = make_core(num_blocks=256, max_num_seqs=4)
    core.add_request("b", tiny_frontend.prepare("Second sentence.", "tara"), params(2), continuation=True,
                     follows="ended-long-ago")
    b = core.requests["b"]
    assert b.follows is None and b.plays_after is None
    while b.first_audio is None:
        core.step()
    assert core.audio.playback("b").start <= b.first_audio


def test_a_following_segment_is_never_due_sooner_than_a_new_speech(make_core, tiny_frontend):
    core = make_core(num_blocks=256, max_num_seqs=4, max_queue_delay=1.0)
    core.add_request("a", tiny_frontend.prepare("First sentence.", "tara"), params(1))
    a = core.requests["a"]
    while a.first_audio is None:
        core.step()
    core.add_request("b", tiny_frontend.prepare("Second sentence.", "tara"), params(2), continuation=True,
                     follows="a")
    b = core.requests["b"]
    # a's audio out so far (its first chunk) runs out sooner than a second: most of a is to come.
    assert b.plays_after == a.runs_dry_at(core.sample_rate) < b.arrival + 1.0 == b.first_audio_deadline
