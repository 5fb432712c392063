"""When a stream's next chunk of audio leaves, and how many frames it holds, by its listener's
slack (capacity/listener.py: positive, it is still playing; zero or less, it has run dry)."""
from __future__ import annotations

from capacity.config import CapacityConfig
from engine.audio.config import StreamingConfig


class ChunkPolicy:
    """Chunk sizes from a resolved StreamingConfig. Invariant: a stream's next chunk starts where
    its emitted audio ends and ends at emitted + k * size for the largest k >= 1 that leaves
    lookahead_frames (first_lookahead_frames for the first chunk) received frames after it (no chunk while k would be 0), where size is
    first_chunk_frames for the first chunk and while the listener is urgent, and otherwise
    chunk_frames (or, growing, the audio emitted so far, between first_chunk_frames and
    chunk_frames)."""

    def __init__(self, config: StreamingConfig, capacity: CapacityConfig) -> None:
        if not config.is_resolved or not capacity.is_resolved:
            raise ValueError("resolve the streaming and capacity configs against the codec's window hints first")
        self.config = config
        self.urgent_slack_seconds = capacity.urgent_slack_seconds

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
        urgent = self.urgent_slack_seconds
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
        if self.urgent_slack_seconds:
            sizes.add(config.first_chunk_frames)
        if config.grow_chunks:
            size = config.first_chunk_frames
            while size < config.chunk_frames:
                sizes.add(size)
                size *= 2
        return sorted(sizes)
