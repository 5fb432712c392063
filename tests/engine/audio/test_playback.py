"""What the audio stage tells the engine of each listener, and the order its windows decode in."""
from __future__ import annotations

import math

import pytest

from engine.audio.chunking import Playback
from engine.audio.config import StreamingConfig
from engine.audio.decoder import StreamingDecoder

from .test_decoder import SPF, random_frames


def one_frame_decoder(codec) -> StreamingDecoder:
    config = StreamingConfig(first_chunk_frames=1, chunk_frames=1, urgent_slack_seconds=0, lookahead_frames=1,
                             defer_slack_seconds=math.inf)
    return StreamingDecoder(codec, config.resolve(codec.window_hints))


def test_playback_is_start_emitted_and_pending(codec):
    frame_s = SPF / codec.sample_rate
    decoder = one_frame_decoder(codec)
    decoder.open("s")
    assert decoder.playback("s") == Playback(None, 0.0, 0.0)
    assert decoder.playback("s").slack(5.0) is None and decoder.playback("s").runs_dry_at is None
    decoder.push("s", random_frames(4, seed=1))
    decoder.collect(decoder.launch(now=3.0), 3.0)  # 3 frames out, 1 held back as lookahead
    playback = decoder.playback("s")
    assert playback == Playback(3.0, pytest.approx(3 * frame_s), pytest.approx(frame_s))
    assert playback.runs_dry_at == pytest.approx(3.0 + 3 * frame_s)
    assert playback.slack(3.1) == pytest.approx(3.0 + 3 * frame_s - 3.1)
    assert decoder.playback("unknown") is None


def test_the_listener_closest_to_running_dry_decodes_first(codec):
    decoder = one_frame_decoder(codec)
    for sid, frames in (("calm", 6), ("urgent", 2)):  # opened first, and further ahead
        decoder.open(sid)
        decoder.push(sid, random_frames(frames, seed=frames))
    decoder.collect(decoder.launch(now=0.0), 0.0)  # calm: 5 frames out, urgent: 1; both start at 0
    for sid in ("calm", "urgent"):
        decoder.push(sid, random_frames(2, seed=9))
    pending = decoder.launch(now=0.01)
    assert [w.stream_id for group, _ in pending.groups for w in group] == ["urgent", "calm"]


def test_windows_past_the_steps_share_wait_while_their_listener_has_audio_to_spare(codec, monkeypatch):
    """With no decode budget left, a launch still decodes the most urgent window, every first
    chunk and every listener within defer_slack_seconds of running dry; a listener further ahead
    waits, and its audio comes whole with a later launch."""
    frame_s = SPF / codec.sample_rate  # 256 ms
    config = StreamingConfig(first_chunk_frames=1, chunk_frames=1, urgent_slack_seconds=0, lookahead_frames=1,
                             left_context_frames=0, crossfade_samples=0, defer_slack_seconds=2 * frame_s)
    decoder = StreamingDecoder(codec, config.resolve(codec.window_hints))
    for sid, frames in (("far", 8), ("near", 2)):
        decoder.open(sid)
        decoder.push(sid, random_frames(frames, seed=frames))
    decoder.collect(decoder.launch(now=0.0), 0.0)  # far: 7 frames out, near: 1; both start at 0
    decoder.open("new")
    for sid in ("far", "near", "new"):
        decoder.push(sid, random_frames(2, seed=5))
    monkeypatch.setattr("engine.audio.decoder.DECODE_BUDGET", 0.0)
    chunks = decoder.collect(decoder.launch(now=0.1), 0.1)
    assert sorted(chunks) == ["near", "new"]  # far holds 7 frames (1.7 s) of audio: it waits
    monkeypatch.setattr("engine.audio.decoder.DECODE_BUDGET", 2.0)
    decoder.push("far", random_frames(4, seed=6))  # frames produced: a share to spend again
    chunks = decoder.collect(decoder.launch(now=0.2), 0.2)
    assert (chunks["far"].frame_start, chunks["far"].frame_end) == (7, 13)  # nothing skipped
