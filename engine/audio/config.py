"""The audio stage's one configuration: how streams are cut into decode windows."""
from __future__ import annotations

from dataclasses import dataclass, fields

from model.codecs.base import WindowHints


@dataclass(slots=True)
class StreamingConfig:
    """How streams are cut into windows; every count is in frames except the crossfade. A field
    left None means "the codec's own value": `resolve(codec.window_hints)` fills it in.

    Invariant: every field that is set is valid, and so is every set pair of fields that
    constrain each other; a resolved config (no None left) is valid as a whole.
    """

    # The first audio is emitted as soon as this many frames (+ lookahead) exist.
    first_chunk_frames: int | None = None
    # Later chunks: decode once this many new frames are ready (or a multiple of it), while
    # the stream's listener has audio to spare (CapacityConfig.urgent_slack_seconds).
    chunk_frames: int | None = None
    # When set, chunks after the first grow: each is as long as all the audio emitted before it
    # (8, 8, 16, 32, ... frames), up to chunk_frames. While generation runs faster than real
    # time the listener then always holds more audio than the next chunk takes to make, so a
    # codec with costly windows can use long chunks without a stall after the first one.
    grow_chunks: bool | None = None
    # (A step decodes every window that is due, up to about twice the frames the step produced;
    # past that, windows of listeners holding more than CapacityConfig.defer_slack_seconds wait.)
    # Frames before the emitted span included in the window (the codec is not causal).
    left_context_frames: int | None = None
    # Frames after the emitted span included in the window.
    lookahead_frames: int | None = None
    # The same for a stream's first chunk, whose audio waits for these frames to be generated:
    # a codec whose output barely depends on its farthest lookahead can start its streams a
    # step sooner at the price of a tiny error where the first chunk meets the second.
    first_lookahead_frames: int | None = None
    # Samples decoded past the emitted end and blended into the next chunk's start.
    crossfade_samples: int | None = None
    # Decode through the codec's incremental decoder where it has one and the audio is decoded
    # in the step (the CPU): each stream's frames once, exactly, as they come, so no window's
    # context is paid again. The first chunk is still cut and decoded as a window (to start a
    # step sooner than the decoder's lag allows); after it, a stream is fed each step while its
    # listener holds little (else in longer pieces, cheaper per frame) and all its final audio
    # leaves when it is (chunk_frames, grow_chunks and the urgent slack no longer apply);
    # lookahead_frames is at least the decoder's lag.
    incremental: bool = True
    # Where the audio is decoded in the step (the CPU): decode on a thread of its own, beside the
    # next step's model forward, so that the codec and the model use two cores (each stream's
    # audio is the same; after its first chunk it leaves one step later). Off by default: on 2
    # cores it serves 1.05-1.1x the audio per wall second but costs 1.1-1.2x the CPU per audio
    # second (benchmarks/results/codec-thread-2026-12-04.md).
    codec_thread: bool = False

    def __post_init__(self) -> None:
        for name in ("first_chunk_frames", "chunk_frames"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        for name in ("left_context_frames", "lookahead_frames", "first_lookahead_frames", "crossfade_samples"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ValueError(f"{name} must be >= 0, got {value}")
        if self.crossfade_samples and 0 in (self.lookahead_frames, self.first_lookahead_frames):
            raise ValueError("a crossfade needs lookahead_frames and first_lookahead_frames >= 1 to decode "
                             "past the chunk end")
        if None not in (self.lookahead_frames, self.first_lookahead_frames) and \
                self.first_lookahead_frames > self.lookahead_frames:
            raise ValueError(f"first_lookahead_frames ({self.first_lookahead_frames}) must not exceed "
                             f"lookahead_frames ({self.lookahead_frames})")

    @property
    def is_resolved(self) -> bool:
        return all(getattr(self, field.name) is not None for field in fields(self))

    def lookahead(self, emitted: int) -> int:
        """The lookahead of the window after `emitted` frames of audio (the first one's, or the rest's)."""
        return self.lookahead_frames if emitted else self.first_lookahead_frames

    def resolve(self, hints: WindowHints) -> StreamingConfig:
        """This config with every None field taken from the codec's `hints`: fully concrete, and
        validated as a whole."""
        values = {field.name: getattr(self, field.name) for field in fields(self)}
        resolved = {name: getattr(hints, name) if value is None else value for name, value in values.items()}
        if self.lookahead_frames is not None and self.first_lookahead_frames is None:
            # A lookahead chosen here, not the codec's, holds for the first chunk too.
            resolved["first_lookahead_frames"] = self.lookahead_frames
        return StreamingConfig(**resolved)
