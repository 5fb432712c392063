"""Many streams' frames → PCM chunks, decoded in overlapping windows batched across streams.

One window of a stream (frame indices; `left` and `ahead` shrink at the stream's edges):

    [start - left ........ start ====== emitted ====== end .. ahead .. end + ahead)
                                                        |~~ crossfade ~~|  kept, blended
                                                                          into the next chunk

With the codec's incremental decoder (`codec.incremental`, the CPU path) a stream's first chunk
is still decoded as a window (with its shorter first lookahead, so that its first audio does not
wait for the decoder's whole lag); after it, the stream's frames go through the decoder once, in
order ([fed, received) whenever it is fed: every step while its listener holds little, in longer
pieces when it holds plenty), and each chunk is all the exact audio that came out, up to the
decoder's lag behind the frames fed.
"""
from __future__ import annotations

import dataclasses
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Hashable, Iterator

import numpy as np
import torch
from torch import Tensor

from capacity.config import CapacityConfig
from capacity.listener import Listener
from engine.audio.chunking import ChunkPolicy
from engine.audio.config import StreamingConfig
from engine.audio.primers import Primer
from engine.audio.runners import SYNC_RUNNER, CodecRunner
from memory.state_slots import StateSlotPool
from model.codecs.base import FrameCodec, IncrementalDecoder, lag_frames


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
    """Frames [base, received) are held (`held()`: `frames`, then the `pending` pushes); audio of
    frames [0, emitted) has been returned, and `tail` holds the samples decoded just past
    `emitted`, to be blended into the next chunk."""

    frames: Tensor | None = None
    # Frames pushed since `frames` was last read, joined onto it by `held` (one concatenation per
    # read, not one per pushed frame: a decode step pushes one frame per stream).
    pending: list[Tensor] = field(default_factory=list)
    base: int = 0
    received: int = 0
    emitted: int = 0
    tail: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))
    finished: bool = False
    # Who hears it (read only: the engine's request table writes it as the audio leaves).
    listener: Listener = field(default_factory=Listener)
    # Incremental decoding only: the decoder's state after frames [0, fed), and the exact
    # samples it returned that are not emitted yet, the first of them being sample `exact_start`.
    state: list | None = None
    fed: int = 0
    exact: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))
    exact_start: int = 0
    # No frame will come until something outside the engine arrives (live text): everything
    # decodable leaves now rather than when its listener runs low. New frames end it.
    draining: bool = False
    # Frames its codec decoded before the stream's first (a primed stream, engine/audio/primers.py):
    # the stream's frame i is the codec's frame primed + i. Its first chunk is cut from its exact
    # audio too (a window decode would start from silence).
    primed: int = 0

    def held(self) -> Tensor:
        """Frames [base, received)."""
        if self.pending:
            self.frames = torch.cat(self.pending if self.frames is None else [self.frames, *self.pending])
            self.pending.clear()
        return self.frames


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
# Incremental decoding feeds a stream whose listener holds more than `feed_slack_seconds`
# (capacity/config.py) in pieces of this many frames: one stream's 8-frame piece cost joe's
# decoder 2.7 ms, a 64-frame one 12 ms (2-core machine).
INCREMENTAL_PIECE_FRAMES = 64
# At most this many frames (streams x frames each) in one incremental feed: a codec step's working
# memory grows with it (a 64-frame piece of Qwen3-TTS's 12 Hz codec is hundreds of MiB a stream on
# a GPU, whose memory the KV pool otherwise fills), and past a few hundred frames a larger call is
# no cheaper per frame.
FEED_FRAMES_PER_CALL = 1024


def _bounded_calls(by_count: dict[int, list]) -> Iterator[list]:
    """The feeds of each frame count, cut into calls of at most FEED_FRAMES_PER_CALL frames (at
    least one stream each)."""
    for count, group in by_count.items():
        per_call = max(1, FEED_FRAMES_PER_CALL // max(1, count))
        for start in range(0, len(group), per_call):
            yield group[start : start + per_call]


def _rows(runner: CodecRunner, audio: object | list[np.ndarray | None]) -> list[np.ndarray | None]:
    """One array of samples (or None) per window from a group's audio: the runner's handle of a
    batch, or the host audio of each window (decoded one by one after a failed batch, or cut
    from incremental decoding)."""
    if isinstance(audio, list):
        return audio
    return list(runner.to_host(audio))


class StreamingDecoder:
    """Per stream: frames pushed in order; audio emitted in order exactly once, in chunks whose
    sizes `policy` (chunking.py) picks; the concatenation of a stream's chunks has exactly
    n_frames * samples_per_frame samples."""

    def __init__(self, codec: FrameCodec, config: StreamingConfig, incremental: IncrementalDecoder | None = None,
                 capacity: CapacityConfig | None = None, state_pool: StateSlotPool | None = None) -> None:
        hints = codec.window_hints
        capacity = (capacity or CapacityConfig()).resolve(hints.urgent_slack_seconds, hints.defer_slack_seconds)
        ChunkPolicy(config, capacity)  # first: it refuses a config with fields left unresolved
        if config.crossfade_samples > codec.samples_per_frame:
            raise ValueError(
                f"crossfade_samples {config.crossfade_samples} exceeds one frame "
                f"({codec.samples_per_frame} samples), the shortest chunk"
            )
        if incremental is not None:
            if config.crossfade_samples:
                raise ValueError("incremental decoding makes exact seams: it takes no crossfade "
                                 "(set crossfade_samples to 0, or turn incremental off)")
            # A later chunk's audio is final once the decoder has had its lag's worth of frames
            # after it.
            lag = lag_frames(incremental, codec.samples_per_frame)
            config = dataclasses.replace(config, lookahead_frames=max(config.lookahead_frames, lag))
        self.policy = ChunkPolicy(config, capacity)
        self.codec = codec
        self.config = config
        self.capacity = capacity
        self.incremental = incremental
        # With a pool (a decoder with batched fixed-size states), each open stream owns a slot of
        # it from `open` until it closes; the decoder's states live there, not in `_Stream.state`.
        self.state_pool = state_pool
        self._lag_frames = 0 if incremental is None else lag_frames(incremental, codec.samples_per_frame)
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

    def first_chunk_ready(self, now: float) -> bool:
        """Whether a stream that has sent no audio yet has its first chunk to decode at `now`."""
        return any(not stream.emitted and self._plan(stream_id, stream, now) is not None
                   for stream_id, stream in self._streams.items())

    def pending_seconds(self, stream_id: Hashable) -> float:
        """Audio whose frames exist but that has not left yet (0 for a stream not open)."""
        stream = self._streams.get(stream_id)
        return 0.0 if stream is None else (stream.received - stream.emitted) * self._frame_seconds

    def seconds_until_free_slot(self) -> float:
        """When a state slot should next be free: when the first stream that has all its frames
        has emitted them (a frame's time if one is just finishing; a second if none is)."""
        finished = [s.received - s.emitted for s in self._streams.values() if s.finished]
        return max(1, min(finished)) * self._frame_seconds if finished else 1.0

    def open(self, stream_id: Hashable, listener: Listener | None = None, primer: Primer | None = None) -> None:
        """Opens a stream whose chunks are sized and ordered by `listener`'s slack (which its
        owner keeps current as the chunks leave; a fresh one: no listener yet), its codec in
        `primer`'s state (only with a state pool) or silent."""
        if stream_id in self._streams:
            raise ValueError(f"stream {stream_id!r} is already open")
        if primer is not None and self.state_pool is None:
            raise ValueError("only a decoder with state slots starts a stream from a primer")
        if self.state_pool is not None:
            self.state_pool.allocate(stream_id)  # first: a full pool opens nothing
            if primer is not None:
                self.state_pool.fill(stream_id, primer.states)
        self._streams[stream_id] = _Stream(listener=listener or Listener(), primed=primer.frames if primer else 0)

    def push(self, stream_id: Hashable, frames: Tensor) -> None:
        """Queues `frames` [n, *frame_shape] after the stream's earlier ones. They are held as
        given, not copied, until they are decoded: the caller never writes to them again."""
        stream = self._streams[stream_id]
        if stream.finished:
            raise ValueError(f"stream {stream_id!r} is finished; no more frames may come")
        self.codec.check_frames(frames, leading_dims=1)
        if frames.requires_grad or frames.dtype != self.codec.frame_dtype:  # as they come, usually
            frames = frames.detach().to(self.codec.frame_dtype)
        stream.pending.append(frames)
        stream.received += frames.shape[0]
        stream.draining = False
        self._produced += frames.shape[0]

    def finish(self, stream_id: Hashable) -> None:
        self._streams[stream_id].finished = True

    def discard(self, stream_id: Hashable) -> None:
        self._close(stream_id)

    def drain(self, stream_id: Hashable) -> None:
        """The stream's frames stop until input from outside arrives: its audio leaves as soon as
        it can be decoded (incremental decoding), not when its listener runs low; unknown ids: no-op."""
        if (stream := self._streams.get(stream_id)) is not None:
            stream.draining = True

    def is_draining(self, stream_id: Hashable) -> bool:
        """Whether the stream is draining and still holds audio it could send."""
        stream = self._streams.get(stream_id)
        return stream is not None and stream.draining and stream.received > stream.emitted

    def _close(self, stream_id: Hashable) -> None:
        """Forgets the stream (its last chunk left, it failed, or it was discarded) and returns
        its decoder state slot."""
        self._streams.pop(stream_id, None)
        if self.state_pool is not None:
            self.state_pool.release(stream_id)

    def decode_ready(self, now: float) -> dict[Hashable, StreamChunk]:
        """Plans, decodes and emits every window ready at `now` (the engine clock's seconds)."""
        return self.collect(self.launch(now=now))

    def decode_first_chunks(self, now: float) -> dict[Hashable, StreamChunk]:
        """`decode_ready` for the streams that have sent no audio yet, and only them (whose first
        audio should not wait while the others' decodes elsewhere)."""
        return self.collect(self.launch(now=now, first_chunks_only=True))

    def launch(self, runner: CodecRunner | None = None, *, now: float, first_chunks_only: bool = False) -> PendingAudio:
        """Plans every ready window (`first_chunks_only`: of the streams with no audio sent yet)
        and starts decoding it (on `runner`'s device stream, if any); stream state only moves in
        `collect` (but for incremental decoding, which decodes here), so launch again only after
        collecting this one. `now` is the engine clock's: listeners' slack is measured at it."""
        runner = runner or SYNC_RUNNER
        empty: list[_Window] = []
        by_length: dict[int, list[_Window]] = defaultdict(list)
        streams = [(sid, s) for sid, s in self._streams.items() if not (first_chunks_only and s.emitted)]
        # NOTE: streams closest to running dry first (a first chunk is due now): their batches
        # launch first (on a side stream they finish first), and so do their windows when a
        # failed batch is retried one window at a time; a bound on windows per step would keep them.
        by_urgency = sorted(streams, key=lambda item: item[1].listener.due_for_first_chunk(now))
        planned = (self._plan(stream_id, stream, now) for stream_id, stream in by_urgency)
        # First chunks always decode (their listeners have nothing): they spend no budget.
        windows = self._this_step([w for w in planned if w is not None], now, spend_budget=not first_chunks_only)
        owners = {w.stream_id: self._streams[w.stream_id] for w in windows}
        for window in windows:
            if window.start == window.end:
                empty.append(window)
            else:
                by_length[window.stop - window.first].append(window)
        groups = []
        if self.incremental is not None:
            # Only first chunks decode as windows (below); the later ones are cut from the exact
            # audio of the streams fed in `_decode_incrementally`.
            by_length = self._first_chunks(by_length, owners)
        for group in by_length.values():
            try:
                audio = runner.decode(self.codec, self._batch(group, owners))
            except Exception:  # noqa: BLE001 - find the stream at fault, spare the others
                audio = self._decode_one_by_one(group, owners, runner)
            groups.append((group, audio))
        if self.incremental is not None:
            groups.append(self._decode_incrementally(windows, owners, now, first_chunks_only))
        return PendingAudio(empty, groups, owners, runner, now)

    def collect(self, pending: PendingAudio) -> dict[Hashable, StreamChunk]:
        """Waits for `pending`'s audio and emits it, skipping streams closed since its launch."""
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
        return chunks

    # ---- incremental decoding -----------------------------------------------------------------

    def _is_approximate(self, window: _Window, stream: _Stream) -> bool:
        """A first chunk whose audio is not final yet by the decoder's lag: it decodes as a window
        (but a primed stream's: a window would start from silence, not the primer's state)."""
        return not stream.emitted and not stream.primed and not window.is_last and window.start != window.end

    def _first_chunks(self, by_length: dict[int, list[_Window]],
                      owners: dict[Hashable, _Stream]) -> dict[int, list[_Window]]:
        return {length: approximate for length, group in by_length.items()
                if (approximate := [w for w in group if self._is_approximate(w, owners[w.stream_id])])}

    def _decode_incrementally(self, windows: list[_Window], owners: dict[Hashable, _Stream], now: float,
                              first_chunks_only: bool = False) -> tuple[list[_Window], list[np.ndarray | None]]:
        """Feeds the open streams (`first_chunks_only`: those with no audio sent yet) the frames
        they received since they were last fed (as `_feeds_now` says), and the streams whose last
        window is due their flush, in batches of streams with as many frames to feed; then cuts
        the exact audio of the windows that are not approximate first chunks."""
        # NOTE: feeding streams each step, not each window when it is due, keeps the codec's work
        # per step proportional to the frames the step made (no step carries a long window) and
        # batches the streams (they make the same frames per step): one call, not one each. A
        # listener far ahead is fed in longer pieces, which cost less per frame.
        feeds: dict[Hashable, bool] = {sid: False for sid, s in self._streams.items()
                                       if self._feeds_now(s, now) and not (first_chunks_only and s.emitted)}
        # A primed stream's first chunk is fed, not decoded as a window (`_is_approximate`).
        feeds.update((w.stream_id, False) for w in windows
                     if w.start != w.end and not owners[w.stream_id].emitted and owners[w.stream_id].primed)
        feeds.update((w.stream_id, True) for w in windows if w.is_last and w.start != w.end)
        by_count: dict[int, list[tuple[Hashable, bool]]] = defaultdict(list)
        for stream_id, flush in feeds.items():
            by_count[self._feed_count(self._streams[stream_id], flush)].append((stream_id, flush))
        for group in _bounded_calls(by_count):
            try:
                self._feed(group)
            except Exception:  # noqa: BLE001 - find the stream at fault, spare the others
                for one in group:
                    try:
                        self._feed([one])
                    except Exception as exc:  # noqa: BLE001 - reported through take_failures
                        self._failures[one[0]] = exc
                        self._close(one[0])
        cut = [w for w in windows if w.start != w.end and not self._is_approximate(w, owners[w.stream_id])]
        return cut, [self._exact_audio(w, owners[w.stream_id]) for w in cut]

    def _feeds_now(self, stream: _Stream, now: float) -> bool:
        """Whether an open stream is fed this step: from its first audio on (the first chunk is a
        window of its own), each step while its listener holds at most `feed_slack_seconds` or
        while it drains, else once it has a whole piece of new frames."""
        slack = stream.listener.slack(now)
        if stream.finished or stream.received == stream.fed or slack is None:
            return False
        return (stream.draining or slack <= self.capacity.feed_slack_seconds
                or stream.received - stream.fed >= INCREMENTAL_PIECE_FRAMES)

    def _feed_count(self, stream: _Stream, flush: bool) -> int:
        return stream.received - stream.fed + (self._lag_frames if flush else 0)

    def _feed(self, feeds: list[tuple[Hashable, bool]]) -> None:
        """Feeds each stream of `feeds` (id, whether to flush its end) every frame it has not
        fed yet, and on a flush as many zero frames after them as the decoder lags."""
        streams = [self._streams[stream_id] for stream_id, _ in feeds]
        pieces = []
        for stream, (_, flush) in zip(streams, feeds):
            frames = self._frames(stream, stream.fed, stream.received)
            pad = self._feed_count(stream, flush) - frames.shape[0]
            if pad:  # past the end every frame is zero padding, whatever it holds
                frames = torch.cat([frames, frames.new_zeros((pad, *frames.shape[1:]))])
            pieces.append(frames)
        totals = [s.received if flush else None for s, (_, flush) in zip(streams, feeds)]
        if self.state_pool is not None:
            slots = self.state_pool.slots_of([stream_id for stream_id, _ in feeds])
            positions = torch.tensor([s.primed + s.fed for s in streams])
            audio, batched = self.incremental.step(torch.stack(pieces), positions, self.state_pool.gather(slots))
            self.state_pool.scatter(slots, batched)
            states = [None] * len(streams)
        else:
            states = [s.state if s.state is not None else self.incremental.initial_state() for s in streams]
            audio, states = self.incremental.decode(torch.stack(pieces), states, [s.fed for s in streams], totals)
        spf = self.codec.samples_per_frame
        for stream, samples, state in zip(streams, audio.float().cpu().numpy(), states):
            stream.exact_start = stream.fed * spf - self.incremental.delay_samples - stream.exact.size
            stream.exact = np.concatenate([stream.exact, samples])
            stream.state, stream.fed = state, stream.received

    def _exact_audio(self, window: _Window, stream: _Stream) -> np.ndarray | None:
        """The window's audio from `window.first` on (as `_emit` cuts it), or None if its stream
        failed to decode."""
        if self._streams.get(window.stream_id) is not stream:
            return None
        spf = self.codec.samples_per_frame
        begin, length = window.first * spf - stream.exact_start, (window.end - window.first) * spf
        if begin < 0 or begin + length > stream.exact.size:  # never: the lookahead covers the lag
            self._failures[window.stream_id] = RuntimeError(
                f"frames [{window.start}, {window.end}) are not decoded yet (decoded: samples "
                f"[{stream.exact_start}, {stream.exact_start + stream.exact.size}))")
            self._close(window.stream_id)
            return None
        return stream.exact[begin : begin + length]

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
                audio.append(runner.to_host(runner.decode(self.codec, self._batch([window], owners)))[0])
            except Exception as exc:  # noqa: BLE001 - reported through take_failures
                # NOTE: a stream closed since its window was launched has no one to tell.
                if self._streams.get(window.stream_id) is owners[window.stream_id]:
                    self._failures[window.stream_id] = exc
                    self._close(window.stream_id)
                audio.append(None)
        return audio

    def _this_step(self, due: list[_Window], now: float, spend_budget: bool = True) -> list[_Window]:
        """The windows of `due` (most urgent first) that decode now: the most urgent, every first
        chunk and every listener within `defer_slack_seconds` of running dry, and the others while
        the frames decoded stay within DECODE_BUDGET times the frames produced since the last
        launch that spent the budget; the rest wait for a later step."""
        budget = DECODE_BUDGET * self._produced
        if spend_budget:
            self._produced = 0
        spent, chosen = 0, []
        for window in due:
            cost = self._cost(window)
            slack = self._streams[window.stream_id].listener.slack(now)
            must = not chosen or slack is None or slack <= self.capacity.defer_slack_seconds
            if must or spent + cost <= budget:
                chosen.append(window)
                spent += cost
        return chosen

    def _cost(self, window: _Window) -> int:
        """Frames decoding the window adds to the step's codec work (incremental decoding feeds
        every stream's new frames anyway: only first chunks and flushes add)."""
        if self.incremental is None:
            return window.stop - window.first
        stream = self._streams[window.stream_id]
        if window.is_last:
            return self._feed_count(stream, flush=True)
        return window.stop - window.first if self._is_approximate(window, stream) else 0

    def _plan(self, stream_id: Hashable, stream: _Stream, now: float) -> _Window | None:
        if self.incremental is not None and stream.emitted and not stream.finished:
            # A chunk costs nothing beyond the feeding, which runs anyway: all final audio leaves
            # when the stream is fed (listeners hold the most they can, and a new stream's second
            # chunk does not wait for a whole chunk's frames past the decoder's lag).
            end = stream.received - self.config.lookahead_frames
            if end <= stream.emitted or not self._feeds_now(stream, now):
                return None
            return _Window(stream_id, stream.emitted, stream.emitted, end, stream.received, False)
        # NOTE: incremental decoding needs no context before the chunk: the decoder's state holds it.
        left = self.config.left_context_frames if self.incremental is None or not stream.emitted else 0
        first = max(0, stream.emitted - left)
        if stream.finished:
            # Final flush: every remaining frame, no lookahead needed.
            return _Window(stream_id, first, stream.emitted, stream.received, stream.received, True)
        end = self.policy.chunk_end(stream.emitted, stream.received, stream.listener.slack(now))
        if end is None:
            return None
        return _Window(stream_id, first, stream.emitted, end, end + self.config.lookahead(stream.emitted), False)

    def _window_frames(self, window: _Window, stream: _Stream) -> Tensor:
        return self._frames(stream, window.first, window.stop)

    @staticmethod
    def _frames(stream: _Stream, first: int, stop: int) -> Tensor:
        return stream.held()[first - stream.base : stop - stream.base]

    def _emit(self, window: _Window, samples: np.ndarray) -> StreamChunk:
        stream = self._streams[window.stream_id]
        spf = self.codec.samples_per_frame
        begin, end = (window.start - window.first) * spf, (window.end - window.first) * spf
        pcm = samples[begin:end].astype(np.float32, copy=True)
        if stream.tail.size and pcm.size:
            fade = stream.tail.size
            pcm[:fade] = stream.tail * (1.0 - self._fade_in) + pcm[:fade] * self._fade_in
        if window.is_last:
            self._close(window.stream_id)
        else:
            stream.tail = samples[end : end + self.config.crossfade_samples].copy()
            stream.emitted = window.end
            if stream.exact.size:
                done = min(stream.exact.size, max(0, window.end * spf - stream.exact_start))
                stream.exact, stream.exact_start = stream.exact[done:], stream.exact_start + done
            keep = max(0, window.end - self.config.left_context_frames)
            if self.incremental is not None:
                keep = min(keep, stream.fed)  # frames not fed yet are still to be decoded
            stream.frames = stream.held()[keep - stream.base :]
            stream.base = keep
        return StreamChunk(pcm, window.is_last, window.start, window.end)
