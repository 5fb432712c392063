"""The chunking policy with constructed clocks: a listener's slack, and the size and end of each
stream's next chunk (first, urgent first-chunk-sized pieces, grown, steady)."""
from __future__ import annotations

import math

from dataclasses import replace

import pytest

from capacity.config import CapacityConfig
from capacity.listener import Listener
from engine.audio.chunking import ChunkPolicy
from engine.audio.config import StreamingConfig

FIXED = StreamingConfig(first_chunk_frames=2, chunk_frames=4, grow_chunks=False, left_context_frames=3,
                        lookahead_frames=1, first_lookahead_frames=1, crossfade_samples=0)
FIXED_CAPACITY = CapacityConfig(urgent_slack_seconds=0, defer_slack_seconds=math.inf)
CAPACITY_FIELDS = ("urgent_slack_seconds", "defer_slack_seconds")


def policy(**changes) -> ChunkPolicy:
    capacity = {k: changes.pop(k) for k in CAPACITY_FIELDS if k in changes}
    return ChunkPolicy(replace(FIXED, **changes), replace(FIXED_CAPACITY, **capacity))


def test_slack_is_the_received_audio_the_listener_has_not_played_yet():
    listener = Listener(sample_rate=4, first_audio_at=10.0, samples_received=8)  # 2 s of audio
    assert listener.slack(now=11.5) == 0.5
    assert listener.slack(now=12.0) == 0.0  # just ran dry
    assert listener.slack(now=13.0) == -1.0  # stalled for 1 s
    assert Listener(sample_rate=4).slack(now=11.5) is None  # no audio yet: no slack either


def test_the_first_chunk_waits_for_first_chunk_frames_plus_lookahead():
    chunks = policy()
    assert chunks.chunk_end(emitted=0, received=2, slack=None) is None
    assert chunks.chunk_end(emitted=0, received=3, slack=None) == 2
    assert chunks.chunk_end(emitted=0, received=8, slack=None) == 6  # every whole chunk that is ready


def test_the_first_chunk_may_look_less_far_ahead_than_the_rest():
    chunks = policy(lookahead_frames=3, first_lookahead_frames=1)
    assert chunks.chunk_end(emitted=0, received=2, slack=None) is None
    assert chunks.chunk_end(emitted=0, received=3, slack=None) == 2  # 2 + 1 frames, not 2 + 3
    assert chunks.chunk_end(emitted=2, received=8, slack=1.0) is None  # later chunks: 4 + 3
    assert chunks.chunk_end(emitted=2, received=9, slack=1.0) == 6


def test_steady_chunks_take_whole_multiples_of_chunk_frames():
    chunks = policy()
    assert chunks.chunk_end(emitted=2, received=6, slack=1.0) is None  # 3 ready, 4 needed
    assert chunks.chunk_end(emitted=2, received=7, slack=1.0) == 6
    assert chunks.chunk_end(emitted=2, received=14, slack=1.0) == 10  # 11 ready: two chunks


def test_an_urgent_listener_gets_what_is_ready_until_it_has_run_dry():
    chunks = policy(urgent_slack_seconds=0.5, first_chunk_frames=1)
    assert chunks.chunk_size(emitted=2, slack=0.6) == 4  # audio to spare: wait for a whole chunk
    assert chunks.chunk_size(emitted=2, slack=0.4) == 1
    assert chunks.chunk_size(emitted=2, slack=0.0) == 1
    assert chunks.chunk_size(emitted=2, slack=-0.1) == 4  # stalled anyway: efficient chunks again
    assert chunks.chunk_size(emitted=2, slack=None) == 4  # no audio out yet, no listener
    assert chunks.chunk_end(emitted=2, received=4, slack=0.1) == 3


def test_urgent_pieces_are_first_chunk_sized_so_each_window_carries_enough_audio():
    chunks = policy(urgent_slack_seconds=0.5, chunk_frames=16)
    assert chunks.chunk_size(emitted=2, slack=0.1) == 2
    assert chunks.chunk_end(emitted=2, received=5, slack=0.1) == 4  # 2 ready: one piece
    assert chunks.chunk_end(emitted=2, received=8, slack=0.1) == 6  # 5 ready: two pieces, 1 waits
    assert chunks.chunk_end(emitted=2, received=4, slack=0.1) is None  # 1 ready: less than a piece
    assert chunks.chunk_size(emitted=0, slack=0.1) == 2  # the first chunk is never cut shorter


def test_zero_urgent_slack_is_never_urgent():
    chunks = policy(urgent_slack_seconds=0)
    assert not chunks.is_urgent(0.0) and not chunks.is_urgent(-1.0) and not chunks.is_urgent(1e-9)


def test_growing_chunks_are_as_long_as_the_audio_before_them():
    chunks = policy(chunk_frames=16, grow_chunks=True)
    assert [chunks.chunk_size(emitted, slack=1.0) for emitted in (0, 2, 4, 8, 16, 40)] == [2, 2, 4, 8, 16, 16]
    assert chunks.chunk_size(emitted=1, slack=1.0) == 2  # never shorter than the first chunk


def test_later_chunk_sizes_are_what_a_keeping_up_stream_sends():
    assert policy().later_chunk_sizes() == [4]
    assert policy(urgent_slack_seconds=0.5).later_chunk_sizes() == [2, 4]
    assert policy(urgent_slack_seconds=0.5, first_chunk_frames=1).later_chunk_sizes() == [1, 4]
    assert policy(chunk_frames=16, grow_chunks=True).later_chunk_sizes() == [2, 4, 8, 16]


def test_an_unresolved_config_is_refused():
    with pytest.raises(ValueError, match="resolve"):
        ChunkPolicy(StreamingConfig(chunk_frames=4), FIXED_CAPACITY)
    with pytest.raises(ValueError, match="resolve"):
        ChunkPolicy(FIXED, CapacityConfig())  # the audio thresholds left to the codec
