"""What the audio stage reads of each listener (its owner, the engine's request table, writes it
as the audio leaves), and the order its windows decode in."""
from __future__ import annotations

import math

import pytest

from capacity.config import CapacityConfig
from capacity.listener import Listener
from engine.audio.config import StreamingConfig
from engine.audio.decoder import StreamingDecoder

from .test_decoder import SPF, emit, random_frames


def one_frame_decoder(codec) -> StreamingDecoder:
    config = StreamingConfig(first_chunk_frames=1, chunk_frames=1, lookahead_frames=1)
    return StreamingDecoder(codec, config.resolve(codec.window_hints),
                            capacity=CapacityConfig(urgent_slack_seconds=0, defer_slack_seconds=math.inf))


def test_the_listener_hears_what_left_and_the_decoder_holds_the_rest_pending(codec):
    frame_s = SPF / codec.sample_rate
    decoder = one_frame_decoder(codec)
    listener = Listener(codec.sample_rate)
    decoder.open("s", listener)
    assert decoder.pending_seconds("s") == 0.0
    assert listener.slack(5.0) is None and listener.runs_dry_at is None
    decoder.push("s", random_frames(4, seed=1))
    assert decoder.pending_seconds("s") == pytest.approx(4 * frame_s)
    chunks = decoder.collect(decoder.launch(now=3.0))  # 3 frames out, 1 held back as lookahead
    # The decoder only reads the listener: what left is its owner's to record.
    assert (listener.first_audio_at, listener.samples_received) == (None, 0)
    listener.received(len(chunks["s"].pcm), 3.0)
    assert (listener.first_audio_at, listener.received_seconds) == (3.0, pytest.approx(3 * frame_s))
    assert decoder.pending_seconds("s") == pytest.approx(frame_s)
    assert listener.runs_dry_at == pytest.approx(3.0 + 3 * frame_s)
    assert listener.slack(3.1) == pytest.approx(3.0 + 3 * frame_s - 3.1)
    assert decoder.pending_seconds("unknown") == 0.0


def test_the_listener_closest_to_running_dry_decodes_first(codec):
    decoder = one_frame_decoder(codec)
    listeners = {sid: Listener(codec.sample_rate) for sid in ("calm", "urgent")}
    for sid, frames in (("calm", 6), ("urgent", 2)):  # opened first, and further ahead
        decoder.open(sid, listeners[sid])
        decoder.push(sid, random_frames(frames, seed=frames))
    emit(decoder, listeners, 0.0)  # calm: 5 frames out, urgent: 1; both start at 0
    for sid in ("calm", "urgent"):
        decoder.push(sid, random_frames(2, seed=9))
    pending = decoder.launch(now=0.01)
    assert [w.stream_id for group, _ in pending.groups for w in group] == ["urgent", "calm"]


def test_a_later_segment_waits_for_the_audio_before_it(codec):
    """Before its first audio, a stream whose listener plays after other audio is due only when
    that has run out: a first chunk due now goes before it."""
    decoder = one_frame_decoder(codec)
    listeners = {"later": Listener(codec.sample_rate, plays_after=5.0), "now": Listener(codec.sample_rate)}
    for sid in listeners:  # "later" opened first
        decoder.open(sid, listeners[sid])
        decoder.push(sid, random_frames(2, seed=3))
    pending = decoder.launch(now=1.0)
    assert [w.stream_id for group, _ in pending.groups for w in group] == ["now", "later"]


def test_windows_past_the_steps_share_wait_while_their_listener_has_audio_to_spare(codec, monkeypatch):
    """With no decode budget left, a launch still decodes the most urgent window, every first
    chunk and every listener within defer_slack_seconds of running dry; a listener further ahead
    waits, and its audio comes whole with a later launch."""
    frame_s = SPF / codec.sample_rate  # 256 ms
    config = StreamingConfig(first_chunk_frames=1, chunk_frames=1, lookahead_frames=1, left_context_frames=0,
                             crossfade_samples=0)
    capacity = CapacityConfig(urgent_slack_seconds=0, defer_slack_seconds=2 * frame_s)
    decoder = StreamingDecoder(codec, config.resolve(codec.window_hints), capacity=capacity)
    listeners = {sid: Listener(codec.sample_rate) for sid in ("far", "near", "new")}
    for sid, frames in (("far", 8), ("near", 2)):
        decoder.open(sid, listeners[sid])
        decoder.push(sid, random_frames(frames, seed=frames))
    emit(decoder, listeners, 0.0)  # far: 7 frames out, near: 1; both start at 0
    decoder.open("new", listeners["new"])
    for sid in ("far", "near", "new"):
        decoder.push(sid, random_frames(2, seed=5))
    monkeypatch.setattr("engine.audio.decoder.DECODE_BUDGET", 0.0)
    chunks = emit(decoder, listeners, 0.1)
    assert sorted(chunks) == ["near", "new"]  # far holds 7 frames (1.7 s) of audio: it waits
    monkeypatch.setattr("engine.audio.decoder.DECODE_BUDGET", 2.0)
    decoder.push("far", random_frames(4, seed=6))  # frames produced: a share to spend again
    chunks = emit(decoder, listeners, 0.2)
    assert (chunks["far"].frame_start, chunks["far"].frame_end) == (7, 13)  # nothing skipped
