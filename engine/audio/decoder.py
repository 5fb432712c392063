"""Many streams' frames → PCM chunks, decoded in overlapping windows batched across streams.

One window of a stream (frame indices; `left` and `ahead` shrink at the stream's edges):

    [start - left ........ start ====== emitted ====== end .. ahead .. end + ahead)
                                                        |~~ crossfade ~~|  kept, blended
                                                                          into the next chunk
"""
from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Hashable

import numpy as np
import torch
from torch import Tensor

from engine.audio.chunking import ChunkPolicy, Playback
from engine.audio.config import StreamingConfig
from engine.audio.runners import SYNC_RUNNER, CodecRunner
from model.codecs.base import FrameCodec


@dataclass(slots=True)
class StreamChunk:
    """Audio of frames [frame_start, frame_end) of one stream: exactly
    (frame_end - frame_start) * samples_per_frame float32 samples."""

    pcm: np.ndarray
    is_last: bool
    frame_start: int
    frame_end: int


@dataclass(slots=True)
class _Stream:
    """Frames [base, received) are held; audio of frames [0, emitted) has been returned, and
    `tail` holds the samples decoded just past `emitted`, to be blended into the next chunk."""

    frames: Tensor | None = None
    base: int = 0
    received: int = 0
    emitted: int = 0
    tail: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))
    finished: bool = False
    # When the stream's first audio left (the assumed start of its playback).
    playback_start: float | None = None


@dataclass(slots=True)
class _Window:
    """Decode frames [first, stop) of a stream; emit the audio of [start, end)."""

    stream_id: Hashable
    first: int
    start: int
    end: int
    stop: int
    is_last: bool


@dataclass(slots=True)
class PendingAudio:
    """Windows launched together: `groups` pair windows with the runner's handle of their batched
    audio (or, after a failed batch, one host array or None per window); `owners` holds each
    window's stream object."""

    empty: list[_Window]
    groups: list[tuple[list[_Window], object | list[np.ndarray | None]]]
    owners: dict[Hashable, _Stream]
    runner: CodecRunner
    launched_at: float


# A step decodes at most this many times the frames produced since the last one (but for the
# windows that cannot wait): above 1, so deferred windows always catch up; a window carries its
# context (joe: 20 frames on a 128-frame chunk), and the first chunks of new streams cost more.
DECODE_BUDGET = 2.0


def _rows(runner: CodecRunner, audio: object | list[np.ndarray | None]) -> list[np.ndarray | None]:
    """One array of samples (or None) per window from a group's audio: the runner's handle of a
    batch, or the host audio of windows decoded one by one after a failed batch."""
    if isinstance(audio, list):
        return [None if a is None else a[0] for a in audio]
    return list(runner.to_host(audio))


class StreamingDecoder:
    """Per stream: frames pushed in order; audio emitted in order exactly once, in chunks whose
    sizes `policy` (chunking.py) picks; the concatenation of a stream's chunks has exactly
    n_frames * samples_per_frame samples."""

    def __init__(self, codec: FrameCodec, config: StreamingConfig) -> None:
        self.policy = ChunkPolicy(config)  # first: it refuses a config with fields left unresolved
        if config.crossfade_samples > codec.samples_per_frame:
            raise ValueError(
                f"crossfade_samples {config.crossfade_samples} exceeds one frame "
                f"({codec.samples_per_frame} samples), the shortest chunk"
            )
        self.codec = codec
        self.config = config
        self._streams: dict[Hashable, _Stream] = {}
        self._failures: dict[Hashable, Exception] = {}
        self._produced = 0  # frames pushed since the last launch
        self._frame_seconds = codec.samples_per_frame / codec.sample_rate
        fade = config.crossfade_samples
        self._fade_in = (np.arange(1, fade + 1, dtype=np.float32) / (fade + 1)).astype(np.float32)

    @property
    def num_streams(self) -> int:
        return len(self._streams)

    @property
    def pending_frames(self) -> int:
        """Frames received but whose audio has not been emitted yet, over all streams."""
        return sum(s.received - s.emitted for s in self._streams.values())

    def playback(self, stream_id: Hashable) -> Playback | None:
        """Where the stream's listener stands; None for a stream not open (or already flushed)."""
        stream = self._streams.get(stream_id)
        return None if stream is None else self._playback(stream)

    def open(self, stream_id: Hashable) -> None:
        if stream_id in self._streams:
            raise ValueError(f"stream {stream_id!r} is already open")
        self._streams[stream_id] = _Stream()

    def push(self, stream_id: Hashable, frames: Tensor) -> None:
        stream = self._streams[stream_id]
        if stream.finished:
            raise ValueError(f"stream {stream_id!r} is finished; no more frames may come")
        self.codec.check_frames(frames, leading_dims=1)
        frames = frames.detach().to(self.codec.frame_dtype)
        stream.frames = frames if stream.frames is None else torch.cat([stream.frames, frames])
        stream.received += frames.shape[0]
        self._produced += frames.shape[0]

    def finish(self, stream_id: Hashable) -> None:
        self._streams[stream_id].finished = True

    def discard(self, stream_id: Hashable) -> None:
        self._streams.pop(stream_id, None)

    def decode_ready(self, now: float | None = None) -> dict[Hashable, StreamChunk]:
        now = time.monotonic() if now is None else now
        return self.collect(self.launch(now=now), now)

    def launch(self, runner: CodecRunner | None = None, now: float | None = None) -> PendingAudio:
        """Plans every ready window and starts decoding it (on `runner`'s device stream, if any);
        stream state only moves in `collect`, so launch again only after collecting this one.
        `now` (monotonic seconds) defaults to the clock; tests pass their own."""
        runner = runner or SYNC_RUNNER
        now = time.monotonic() if now is None else now
        empty: list[_Window] = []
        by_length: dict[int, list[_Window]] = defaultdict(list)
        # NOTE: streams closest to running dry first (a first chunk is due now): their batches
        # launch first (on a side stream they finish first), and so do their windows when a
        # failed batch is retried one window at a time; a bound on windows per step would keep them.
        by_urgency = sorted(self._streams.items(), key=lambda item: self._runs_dry_at(item[1], now))
        planned = (self._plan(stream_id, stream, now) for stream_id, stream in by_urgency)
        windows = self._this_step([w for w in planned if w is not None], now)
        owners = {w.stream_id: self._streams[w.stream_id] for w in windows}
        for window in windows:
            if window.start == window.end:
                empty.append(window)
            else:
                by_length[window.stop - window.first].append(window)
        groups = []
        for group in by_length.values():
            try:
                audio = runner.decode(self.codec, self._batch(group, owners))
            except Exception:  # noqa: BLE001 - find the stream at fault, spare the others
                audio = self._decode_one_by_one(group, owners, runner)
            groups.append((group, audio))
        return PendingAudio(empty, groups, owners, runner, now)

    def collect(self, pending: PendingAudio, now: float | None = None) -> dict[Hashable, StreamChunk]:
        """Waits for `pending`'s audio and emits it, skipping streams closed since its launch. `now`
        (monotonic seconds, default the clock) is when the audio leaves: a listener's playback
        starts then."""
        now = time.monotonic() if now is None else now
        chunks: dict[Hashable, StreamChunk] = {}
        for window in pending.empty:
            if self._owns(pending, window):
                chunks[window.stream_id] = self._emit(window, np.zeros(0, np.float32))
        for windows, audio in pending.groups:
            try:
                samples = _rows(pending.runner, audio)
            except Exception:  # noqa: BLE001 - a runner that decodes later fails later: as in launch
                samples = _rows(SYNC_RUNNER, self._decode_one_by_one(windows, pending.owners, SYNC_RUNNER))
            for window, rows in zip(windows, samples):
                if rows is not None and self._owns(pending, window):
                    chunks[window.stream_id] = self._emit(window, rows)
                    stream = pending.owners[window.stream_id]
                    if stream.playback_start is None:
                        stream.playback_start = now
        return chunks

    def take_failures(self) -> dict[Hashable, Exception]:
        """Streams whose window failed to decode since the last call; they are already closed."""
        failures, self._failures = self._failures, {}
        return failures

    def _owns(self, pending: PendingAudio, window: _Window) -> bool:
        # NOTE: an id may be discarded and reopened while its audio is in flight; identity, not
        # the id, says whether the window still belongs to the open stream.
        return self._streams.get(window.stream_id) is pending.owners[window.stream_id]

    def _batch(self, windows: list[_Window], owners: dict[Hashable, _Stream]) -> Tensor:
        return torch.stack([self._window_frames(w, owners[w.stream_id]) for w in windows])

    def _decode_one_by_one(self, windows: list[_Window], owners: dict[Hashable, _Stream],
                           runner: CodecRunner) -> list[np.ndarray | None]:
        audio: list[np.ndarray | None] = []
        for window in windows:
            try:
                audio.append(runner.to_host(runner.decode(self.codec, self._batch([window], owners))))
            except Exception as exc:  # noqa: BLE001 - reported through take_failures
                # NOTE: a stream closed since its window was launched has no one to tell.
                if self._streams.get(window.stream_id) is owners[window.stream_id]:
                    self._failures[window.stream_id] = exc
                    del self._streams[window.stream_id]
                audio.append(None)
        return audio

    def _this_step(self, due: list[_Window], now: float) -> list[_Window]:
        """The windows of `due` (most urgent first) that decode now: the most urgent, every first
        chunk and every listener within `defer_slack_seconds` of running dry, and the others while
        the frames decoded stay within DECODE_BUDGET times the frames produced since the last
        launch; the rest wait for a later step."""
        budget, self._produced = DECODE_BUDGET * self._produced, 0
        spent, chosen = 0, []
        for window in due:
            cost = window.stop - window.first
            slack = self._playback(self._streams[window.stream_id]).slack(now)
            must = not chosen or slack is None or slack <= self.config.defer_slack_seconds
            if must or spent + cost <= budget:
                chosen.append(window)
                spent += cost
        return chosen

    def _plan(self, stream_id: Hashable, stream: _Stream, now: float) -> _Window | None:
        first = max(0, stream.emitted - self.config.left_context_frames)
        if stream.finished:
            # Final flush: every remaining frame, no lookahead needed.
            return _Window(stream_id, first, stream.emitted, stream.received, stream.received, True)
        end = self.policy.chunk_end(stream.emitted, stream.received, self._playback(stream).slack(now))
        if end is None:
            return None
        return _Window(stream_id, first, stream.emitted, end, end + self.config.lookahead(stream.emitted), False)

    def _playback(self, stream: _Stream) -> Playback:
        return Playback(stream.playback_start, stream.emitted * self._frame_seconds,
                        (stream.received - stream.emitted) * self._frame_seconds)

    def _runs_dry_at(self, stream: _Stream, now: float) -> float:
        dry = self._playback(stream).runs_dry_at
        return now if dry is None else dry

    def _window_frames(self, window: _Window, stream: _Stream) -> Tensor:
        return stream.frames[window.first - stream.base : window.stop - stream.base]

    def _emit(self, window: _Window, samples: np.ndarray) -> StreamChunk:
        stream = self._streams[window.stream_id]
        spf = self.codec.samples_per_frame
        begin, end = (window.start - window.first) * spf, (window.end - window.first) * spf
        pcm = samples[begin:end].astype(np.float32, copy=True)
        if stream.tail.size and pcm.size:
            fade = stream.tail.size
            pcm[:fade] = stream.tail * (1.0 - self._fade_in) + pcm[:fade] * self._fade_in
        if window.is_last:
            del self._streams[window.stream_id]
        else:
            stream.tail = samples[end : end + self.config.crossfade_samples].copy()
            stream.emitted = window.end
            keep = max(0, window.end - self.config.left_context_frames)
            stream.frames = stream.frames[keep - stream.base :]
            stream.base = keep
        return StreamChunk(pcm, window.is_last, window.start, window.end)
