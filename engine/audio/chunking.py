"""When a stream's next chunk of audio leaves, and how many frames it holds.

A listener is assumed to start playing a stream when its first chunk leaves and to play on
without pause. Its slack is how much of the audio emitted so far it still has to play:

    slack = playback_start + emitted audio seconds - now

Positive: it is still playing; zero or less: it has run dry (and is stalled until more comes).
"""
from __future__ import annotations

from dataclasses import dataclass

from engine.audio.config import StreamingConfig


def listener_slack(playback_start: float, emitted_seconds: float, now: float) -> float:
    """Seconds of emitted audio a listener who began playing at `playback_start` (monotonic
    seconds) has left at `now`."""
    return playback_start + emitted_seconds - now


@dataclass(slots=True, frozen=True)
class Playback:
    """Where one stream's listener stands: `start` is when its first audio left (None before),
    `emitted_seconds` the audio out so far, `pending_seconds` audio whose frames exist but which
    has not left yet (it leaves with a later chunk)."""

    start: float | None
    emitted_seconds: float
    pending_seconds: float

    def slack(self, now: float) -> float | None:
        """The listener's slack at `now`; None before the stream's first audio."""
        return None if self.start is None else listener_slack(self.start, self.emitted_seconds, now)

    @property
    def runs_dry_at(self) -> float | None:
        """When the listener will have played everything emitted so far; None before its start."""
        return None if self.start is None else self.start + self.emitted_seconds


class ChunkPolicy:
    """Chunk sizes from a resolved StreamingConfig. Invariant: a stream's next chunk starts where
    its emitted audio ends and ends at emitted + k * size for the largest k >= 1 that leaves
    lookahead_frames (first_lookahead_frames for the first chunk) received frames after it (no chunk while k would be 0), where size is
    first_chunk_frames for the first chunk and while the listener is urgent, and otherwise
    chunk_frames (or, growing, the audio emitted so far, between first_chunk_frames and
    chunk_frames)."""

    def __init__(self, config: StreamingConfig) -> None:
        if not config.is_resolved:
            raise ValueError("resolve the streaming config against the codec's window hints first")
        self.config = config

    def chunk_end(self, emitted: int, received: int, slack: float | None) -> int | None:
        """The frame the next chunk ends at, or None while it is not ready: `emitted` frames have
        audio out, `received` frames exist, and `slack` is the listener's (None before the
        stream's first audio)."""
        size = self.chunk_size(emitted, slack)
        ready = received - self.config.lookahead(emitted) - emitted
        if ready < size:
            return None
        return emitted + ready // size * size

    def chunk_size(self, emitted: int, slack: float | None) -> int:
        config = self.config
        if not emitted:
            return config.first_chunk_frames
        if self.is_urgent(slack):
            return config.first_chunk_frames
        if config.grow_chunks:
            return min(config.chunk_frames, max(config.first_chunk_frames, emitted))
        return config.chunk_frames

    def is_urgent(self, slack: float | None) -> bool:
        urgent = self.config.urgent_slack_seconds
        if slack is None or urgent == 0:
            return False
        # NOTE: once a listener has run dry it is stalled whatever we do; single-frame windows
        # would then only spend more codec time per frame and slow every stream down further.
        return 0.0 <= slack < urgent

    def later_chunk_sizes(self) -> list[int]:
        """The sizes chunks after the first take while a stream keeps up with its frames: a
        stream's last chunk, and several chunks' worth after a burst of frames, have others."""
        config = self.config
        sizes = {config.chunk_frames}
        if config.urgent_slack_seconds:
            sizes.add(config.first_chunk_frames)
        if config.grow_chunks:
            size = config.first_chunk_frames
            while size < config.chunk_frames:
                sizes.add(size)
                size *= 2
        return sorted(sizes)
