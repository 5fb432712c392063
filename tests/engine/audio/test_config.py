"""StreamingConfig (and CapacityConfig's two audio thresholds): None fields take the codec's
window hints, given fields win, and a config that could not stream is refused when it is made or
resolved."""
from __future__ import annotations

from dataclasses import asdict, fields

import pytest

from capacity.config import CapacityConfig
from engine.audio.config import StreamingConfig
from model.codecs.base import FrameCodec, WindowHints
from model.families.joe.codec import JoeFrameCodec

SLACK_HINTS = ("urgent_slack_seconds", "defer_slack_seconds")  # CapacityConfig's, not StreamingConfig's
HINTS = WindowHints(first_chunk_frames=8, chunk_frames=128, urgent_slack_seconds=0.12, grow_chunks=True,
                    left_context_frames=10, lookahead_frames=10, first_lookahead_frames=8, crossfade_samples=0,
                    defer_slack_seconds=1.0)


def test_every_field_left_to_the_codec_takes_its_hint():
    resolved = StreamingConfig().resolve(HINTS)
    assert resolved.is_resolved and not StreamingConfig().is_resolved
    # `incremental` and `codec_thread` are the engine's choices (the codec says by having an
    # incremental decoder; where the decoding runs is not the codec's to say).
    assert asdict(resolved) == {field.name: getattr(HINTS, field.name) for field in fields(WindowHints)
                                if field.name not in SLACK_HINTS} | {"incremental": True, "codec_thread": False}
    capacity = CapacityConfig().resolve(HINTS.urgent_slack_seconds, HINTS.defer_slack_seconds)
    assert capacity.is_resolved and not CapacityConfig().is_resolved
    assert (capacity.urgent_slack_seconds, capacity.defer_slack_seconds) == (0.12, 1.0)


def test_given_fields_win_over_the_hints():
    resolved = StreamingConfig(chunk_frames=16, grow_chunks=False).resolve(HINTS)
    assert (resolved.chunk_frames, resolved.grow_chunks) == (16, False)
    capacity = CapacityConfig(urgent_slack_seconds=0.25).resolve(HINTS.urgent_slack_seconds, HINTS.defer_slack_seconds)
    assert (capacity.urgent_slack_seconds, capacity.defer_slack_seconds) == (0.25, 1.0)
    assert CapacityConfig(urgent_slack_seconds=0).resolve(0.5, 1.0).urgent_slack_seconds == 0  # 0: "never", not unset
    assert (resolved.first_chunk_frames, resolved.left_context_frames, resolved.lookahead_frames) == (8, 10, 10)
    # Zero and False are values, not "unset".
    assert StreamingConfig(lookahead_frames=0, crossfade_samples=0).resolve(WindowHints()).lookahead_frames == 0


def test_a_lookahead_given_holds_for_the_first_chunk_unless_it_is_given_too():
    assert StreamingConfig().resolve(HINTS).first_lookahead_frames == 8  # joe's: one step sooner
    assert StreamingConfig(lookahead_frames=6).resolve(HINTS).first_lookahead_frames == 6
    resolved = StreamingConfig(lookahead_frames=6, first_lookahead_frames=4).resolve(HINTS)
    assert (resolved.lookahead(0), resolved.lookahead(8)) == (4, 6)


def test_resolving_a_resolved_config_changes_nothing():
    resolved = StreamingConfig(chunk_frames=6).resolve(WindowHints())
    assert resolved.resolve(HINTS) == resolved


def test_the_codecs_own_hints():
    # The defaults were tuned for SNAC; joe's codec streams long growing chunks with wide context.
    assert StreamingConfig().resolve(FrameCodec.window_hints) == StreamingConfig(
        first_chunk_frames=1, chunk_frames=4, grow_chunks=False,
        left_context_frames=3, lookahead_frames=2, first_lookahead_frames=2, crossfade_samples=256)
    assert (FrameCodec.window_hints.urgent_slack_seconds, FrameCodec.window_hints.defer_slack_seconds) == (0.5, 1.0)
    assert JoeFrameCodec.window_hints == HINTS


@pytest.mark.parametrize("given, message", [
    (dict(first_chunk_frames=0), "first_chunk_frames must be >= 1"),
    (dict(chunk_frames=0), "chunk_frames must be >= 1"),
    (dict(left_context_frames=-1), "left_context_frames must be >= 0"),
    (dict(lookahead_frames=-1), "lookahead_frames must be >= 0"),
    (dict(crossfade_samples=-1), "crossfade_samples must be >= 0"),
    (dict(lookahead_frames=0, crossfade_samples=64), "a crossfade needs lookahead_frames"),
    (dict(first_lookahead_frames=0, crossfade_samples=64), "first_lookahead_frames >= 1"),
    (dict(first_lookahead_frames=-1), "first_lookahead_frames must be >= 0"),
    (dict(lookahead_frames=2, first_lookahead_frames=3), "must not exceed lookahead_frames"),
])
def test_invalid_fields_are_refused_when_given(given, message):
    with pytest.raises(ValueError, match=message):
        StreamingConfig(**given)


@pytest.mark.parametrize("given, message", [
    (dict(urgent_slack_seconds=-1.0), "urgent_slack_seconds must be >= 0"),
    (dict(defer_slack_seconds=-0.5), "defer_slack_seconds must be >= 0"),
    (dict(max_queue_delay=0.0), "max_queue_delay must be > 0"),
    (dict(skip_slack_seconds=-1.0), "skip_slack_seconds must be > 0"),
    (dict(feed_slack_seconds=-0.1), "feed_slack_seconds must be >= 0"),
    (dict(room_limit=0), "room_limit must be >= 1"),
])
def test_invalid_capacity_thresholds_are_refused_when_given(given, message):
    with pytest.raises(ValueError, match=message):
        CapacityConfig(**given)


def test_a_field_that_clashes_with_a_hint_is_refused_when_resolved():
    config = StreamingConfig(lookahead_frames=0)  # valid alone: the crossfade is the codec's
    with pytest.raises(ValueError, match="a crossfade needs lookahead_frames"):
        config.resolve(WindowHints(crossfade_samples=256))
    assert config.resolve(HINTS).lookahead_frames == 0  # joe's codec needs no crossfade
