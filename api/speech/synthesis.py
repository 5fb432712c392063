"""One speech response's engine requests: its segments, synthesized in order and streamed as one
audio stream, the next segment's request running ahead of the current one's end."""
from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from typing import AsyncIterator, Callable, Protocol

import numpy as np

from engine.client import EngineClient
from engine.errors import EngineDeadError
from api.speech.backpressure import ClientBacklog
from api.speech.word_timeline import WordTimeline
from engine.outputs import AudioChunk
from model.families.base import SpeechPrompt, SpokenWord
from model.sampling import SamplingParams

# Edges of a join between segments are faded over this long so the step between two
# independently generated waveforms cannot click.
JOIN_FADE_SECONDS = 0.005
# What a segment's queue holds instead of chunks when the speech has no further segment.
_NO_MORE = object()


class SynthesisFailed(RuntimeError):
    """The engine ended a segment with an error after audio had started."""


@dataclass(slots=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0

    def as_dict(self) -> dict[str, int]:
        total = self.input_tokens + self.output_tokens
        return {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens, "total_tokens": total}


@dataclass(slots=True)
class Segment:
    """One engine request of a speech request: its text, already prepared into `prompt` (which
    fits the engine's context with `params.max_tokens` outputs)."""

    text: str
    params: SamplingParams
    prompt: SpeechPrompt
    # Its speed relative to the speech's (prepared at it), and seconds of silence before and
    # after its audio (SSML's prosody rate and breaks; api/speech/planning.py).
    rate: float = 1.0
    pause_before: float = 0.0
    pause_after: float = 0.0
    # The engine request's id, when the source must know it (live text is sent to it); else new.
    request_id: str | None = None


class SegmentSource(Protocol):
    """A speech's segments in order (api/speech/planning.py's SpeechSegments)."""

    async def next(self) -> Segment | None:
        """The next prepared segment; None after the last. Raises when the first cannot be had."""

    def outputs_after(self) -> int:
        """The outputs the segments not handed out yet are expected to take (a rough estimate
        from their text: what admission should plan for besides the segment being started)."""

    def close(self) -> None:
        """Drops whatever is still being prepared."""

    def take_trailing_pause(self) -> float:
        """Seconds of silence after the last segment beyond its own `pause_after` (asked once,
        after `next` returned None)."""


class SegmentedSynthesis:
    """Streams the audio of a speech's segments in order. Invariants: each segment's audio is
    yielded once, whole and in order; at most two engine requests are open (the one being
    streamed, and the next, whose prompt is taken from `segments` once the current one starts
    streaming); segments after the first go to the engine as continuations, each following the
    one before (the engine counts its listener's wait from that one's end), and so does the
    first when `start` is told whose audio it follows (a speak socket's next turn, while the
    connection's listener still plays the turn before); `close` aborts what
    is open and drops preparations still pending; `words` holds each segment's words placed where
    its audio begins in what `pcm` yields (`position` samples so far); each engine request is
    paused while more than `backlog_seconds` of its audio waits for the consumer, and when
    nothing is taken for `stall_seconds` of such a pause `on_stall` decides (by default: the
    consumer of `pcm` is cancelled, or, if none ever came, the synthesis is closed;
    api/speech/backpressure.py). `close` runs each `on_close` callback once. Errors that stop segment 0
    before any audio (nothing to speak, unknown voice, full queue) surface from `start`, so the
    caller can still answer with a status. A segment's pauses (SSML breaks) are silence before
    and after its audio, exactly their length once the pipeline's stretch (`pause_stretch`) is
    applied, and the audio next to them is faded, not cut."""

    def __init__(self, client: EngineClient, segments: SegmentSource, voice: str, speed: float = 1.0,
                 backlog_seconds: float = 10.0, stall_seconds: float = 30.0,
                 on_stall: Callable[[], bool] | None = None, pause_stretch: float = 1.0) -> None:
        self._client = client
        self._segments = segments
        self._voice = voice
        self._speed = speed
        self._queues: list[asyncio.Queue] = []
        self._tasks: list[asyncio.Task] = []
        self._first: AudioChunk | None = None
        # How many segments the speech has, once the segment after the last has been asked for.
        self._count: int | None = None
        self.usage = Usage()
        self.sample_rate = client.sample_rate
        # Samples `pcm` has yielded so far, and the segments' words placed on that audio.
        self.position = 0
        self.words = WordTimeline(self.sample_rate)
        self._segment_words: dict[int, tuple[SpokenWord, ...]] = {}
        self._pauses: dict[int, tuple[float, float]] = {}  # each segment's (before, after), when not 0
        # The audio pipeline time-stretches what `pcm` yields by the part of the speed the model
        # did not speak (speed / model speed): pauses are made that much longer, so that they
        # last exactly their time in what the client hears.
        self._pause_stretch = pause_stretch
        self._request_ids: dict[int, str] = {}  # each segment's engine request
        # Segment 0 continues a stream already playing (`start`): it is never queued or refused,
        # and follows this request (None: one the engine no longer holds, or none).
        self._continuation = False
        self._first_follows: str | None = None
        self._arrived: float | None = None  # when the speech arrived: segment 0's deadline counts from it
        self._backlog = ClientBacklog(client, self.sample_rate, backlog_seconds, stall_seconds,
                                      on_stall or self._stop_reading)
        self._consumer: asyncio.Task | None = None  # the task iterating `pcm`
        self.on_close: list[Callable[[], None]] = []
        self._failed = False
        self._fade = np.sin(np.linspace(0.0, np.pi / 2, max(1, int(JOIN_FADE_SECONDS * self.sample_rate)))) ** 2

    async def start(self, continuation: bool = False, follows: str | None = None, arrived: float | None = None) -> None:
        """Opens segment 0 (its prompt first) and waits for its first chunk (or its refusal).
        `continuation`: its listener is still playing audio sent before it (that of request
        `follows`, when that is known), so it goes to the engine as a continuation. `arrived`
        (time.monotonic()): when the speech came; its first audio is due counting from then."""
        self._continuation, self._first_follows, self._arrived = continuation, follows, arrived
        self._open_next()
        self._first = await self._next_item(0)

    async def pcm(self) -> AsyncIterator[np.ndarray]:
        """Float32 PCM at the model's rate, the segments joined with short fades."""
        self._consumer = asyncio.current_task()
        held = np.zeros(0, dtype=np.float32)
        index, item = 0, self._first
        while item is not _NO_MORE:
            pause_before, _ = self._pauses.get(index, (0.0, 0.0))
            if held.size:  # the previous segment's end, held back: this is a join
                yield self._count_out(held * self._fade[::-1][-held.size:])
                held = held[:0]
            if pause_before:
                yield self._count_out(self._silence(pause_before))
            # Joins keep every sample: this segment begins after all of the ones before it.
            self.words.add_segment(self.position, self._segment_words.pop(index, ()))
            fade_in = index > 0
            async for chunk in self._segment_chunks(index, item):
                samples = np.concatenate([held, chunk.pcm.astype(np.float32)])
                if fade_in and samples.size:
                    n = min(samples.size, self._fade.size)
                    samples[:n] *= self._fade[:n]
                    fade_in = False
                # Hold back the fade length unless this is the last segment: it is faded out if a
                # join follows.
                cut = samples.size if self._count == index + 1 else max(0, samples.size - self._fade.size)
                held = samples[cut:]
                if cut:
                    yield self._count_out(samples[:cut])
            _, pause_after = self._pauses.pop(index, (0.0, 0.0))
            index += 1
            item = await self._next_item(index)
            if item is _NO_MORE:
                pause_after += self._segments.take_trailing_pause()
            if pause_after:  # a break: the segment ends faded out, then silence
                if held.size:
                    yield self._count_out(held * self._fade[::-1][-held.size:])
                    held = held[:0]
                yield self._count_out(self._silence(pause_after))
        if held.size:
            yield self._count_out(held)

    def _silence(self, seconds: float) -> np.ndarray:
        return np.zeros(round(seconds * self._pause_stretch * self.sample_rate), dtype=np.float32)

    @property
    def last_request_id(self) -> str | None:
        """The engine request of the speech's last segment, once it is known that no segment
        follows it (None before: the engine hands a request's planned rest of the speech to the
        one that follows it, and a request of another speech would drop this one's)."""
        return self._request_ids.get(self._count - 1) if self._count else None

    def _count_out(self, samples: np.ndarray) -> np.ndarray:
        self.position += samples.size
        return samples

    def fail(self, reason: str) -> None:
        """Ends the speech now with SynthesisFailed(reason): the audio still queued is dropped,
        its engine requests are aborted and no further segment starts (a shutdown whose drain
        ran out of time)."""
        self._failed = True
        for task in self._tasks:
            task.cancel()
        for queue in self._queues:
            while not queue.empty():
                queue.get_nowait()
            queue.put_nowait(SynthesisFailed(reason))

    def close(self) -> None:
        """Cancels the open requests' tasks (each aborts its engine request as it unwinds) and the
        preparations still pending."""
        for task in self._tasks:
            task.cancel()
        self._backlog.close()
        self._segments.close()
        callbacks, self.on_close = self.on_close, []
        for callback in callbacks:
            callback()

    async def wait_closed(self) -> None:
        """Waits, after `close`, until its requests' tasks have unwound: each open engine request
        has then been aborted (a speak socket answers a Clear only after that)."""
        if self._tasks:
            await asyncio.wait(self._tasks)

    async def _segment_chunks(self, index: int, chunk: AudioChunk) -> AsyncIterator[AudioChunk]:
        while True:
            if chunk.finish_reason == "error":
                raise SynthesisFailed(chunk.error or "the engine failed this request")
            yield chunk
            if index + 1 == len(self._queues) and not self._failed:
                # The current segment has started: run the next one ahead, now that its first
                # chunk is on its way (encoded and written), not beside it.
                self._open_next()
            if chunk.finished:
                return
            chunk = await self._next_item(index)

    async def _next_item(self, index: int):
        """Segment `index`'s next chunk, or _NO_MORE when there is no such segment."""
        item = await self._queues[index].get()
        if isinstance(item, AudioChunk):
            self._backlog.taken(item.request_id, item.pcm.size)
        if isinstance(item, BaseException):
            if index == 0 or isinstance(item, EngineDeadError):
                raise item
            raise SynthesisFailed(f"segment {index + 1} failed: {item}") from item
        if item is not _NO_MORE and item.finished and item.metrics is not None:
            self.usage.input_tokens += item.metrics.prompt_tokens
            self.usage.output_tokens += item.metrics.output_tokens
        return item

    def _stop_reading(self) -> bool:
        """The default stall: the consumer of `pcm` is cancelled (a response's task: it aborts
        the engine requests as it unwinds); a synthesis whose audio nobody ever began to read (a
        response body that never started) is closed."""
        if self._consumer is None:
            self.close()
        elif not self._consumer.done():
            self._consumer.cancel()
        return True

    def _open_next(self) -> None:
        queue: asyncio.Queue = asyncio.Queue()
        self._queues.append(queue)
        self._tasks.append(asyncio.create_task(self._pump(len(self._queues) - 1, queue)))

    async def _pump(self, index: int, queue: asyncio.Queue) -> None:
        try:
            segment = await self._segments.next()
            if segment is None:
                self._count = index
                queue.put_nowait(_NO_MORE)
                return
            self._segment_words[index] = segment.prompt.words
            if segment.pause_before or segment.pause_after:
                self._pauses[index] = (segment.pause_before, segment.pause_after)
            request_id = self._request_ids[index] = segment.request_id or uuid.uuid4().hex
            follows = self._request_ids[index - 1] if index else self._first_follows
            try:
                async for chunk in self._client.synthesize(segment.text, self._voice, segment.params,
                                                           request_id=request_id, speed=self._speed * segment.rate,
                                                           prompt=segment.prompt,
                                                           continuation=index > 0 or self._continuation,
                                                           outputs_after=self._segments.outputs_after(),
                                                           follows=follows,
                                                           arrived=None if index else self._arrived):
                    queue.put_nowait(chunk)
                    self._backlog.added(request_id, chunk.pcm.size)
            finally:
                self._backlog.ended(request_id)
        except Exception as exc:  # handed to the consumer, which raises it in order
            queue.put_nowait(exc)
