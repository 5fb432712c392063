"""One speech response's engine requests: its text segments, synthesized in order and streamed
as one audio stream, the next segment's request running ahead of the current one's end."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import AsyncIterator

import numpy as np

from engine.client import EngineClient
from engine.outputs import AudioChunk
from model.families.base import SpeechPrompt
from model.sampling import SamplingParams

# Edges of a join between segments are faded over this long so the step between two
# independently generated waveforms cannot click.
JOIN_FADE_SECONDS = 0.005


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
    """One engine request of a speech request; `prompt` is its text already prepared by planning
    (None: the engine client prepares it), so that no text is processed twice."""

    text: str
    params: SamplingParams
    prompt: SpeechPrompt | None = None


class SegmentedSynthesis:
    """Streams the audio of `segments` in order. Invariants: each segment's audio is yielded once,
    whole and in order; at most two engine requests are open (the one being streamed and the
    next); `close` aborts whatever is still open. Errors that stop segment 0 before any audio
    (full queue, bad prompt) surface from `start`, so the caller can still answer with a status."""

    def __init__(self, client: EngineClient, segments: list[Segment], voice: str, speed: float = 1.0) -> None:
        if not segments:
            raise ValueError("nothing to synthesize")
        self._client = client
        self._segments = segments
        self._voice = voice
        self._speed = speed
        self._queues: list[asyncio.Queue] = []
        self._tasks: list[asyncio.Task] = []
        self._first: AudioChunk | None = None
        self.usage = Usage()
        self.sample_rate = client.sample_rate
        self._fade = np.sin(np.linspace(0.0, np.pi / 2, max(1, int(JOIN_FADE_SECONDS * self.sample_rate)))) ** 2

    async def start(self) -> None:
        """Opens segment 0 and waits for its first chunk (or its refusal)."""
        self._open_next()
        self._first = await self._next_chunk(0)

    async def pcm(self) -> AsyncIterator[np.ndarray]:
        """Float32 PCM at the model's rate, the segments joined with short fades."""
        held = np.zeros(0, dtype=np.float32)
        for index in range(len(self._segments)):
            fade_in = index > 0
            async for chunk in self._segment_chunks(index):
                samples = np.concatenate([held, chunk.pcm.astype(np.float32)])
                if fade_in and samples.size:
                    n = min(samples.size, self._fade.size)
                    samples[:n] *= self._fade[:n]
                    fade_in = False
                # Hold back the fade length: it is faded out if this turns out to be a join.
                cut = max(0, samples.size - self._fade.size) if index + 1 < len(self._segments) else samples.size
                held = samples[cut:]
                if cut:
                    yield samples[:cut]
            if held.size:
                yield held * self._fade[::-1][-held.size:]
                held = held[:0]

    def close(self) -> None:
        """Cancels the open requests' tasks; each aborts its engine request as it unwinds."""
        for task in self._tasks:
            task.cancel()

    async def _segment_chunks(self, index: int) -> AsyncIterator[AudioChunk]:
        chunk = self._first if index == 0 else await self._next_chunk(index)
        while True:
            if index + 1 == len(self._queues) and index + 1 < len(self._segments):
                self._open_next()  # the current segment has started: run the next one ahead
            if chunk.finish_reason == "error":
                raise SynthesisFailed(chunk.error or "the engine failed this request")
            yield chunk
            if chunk.finished:
                return
            chunk = await self._next_chunk(index)

    async def _next_chunk(self, index: int) -> AudioChunk:
        item = await self._queues[index].get()
        if isinstance(item, BaseException):
            raise item
        if item.finished and item.metrics is not None:
            self.usage.input_tokens += item.metrics.prompt_tokens
            self.usage.output_tokens += item.metrics.output_tokens
        return item

    def _open_next(self) -> None:
        segment = self._segments[len(self._queues)]
        queue: asyncio.Queue = asyncio.Queue()
        self._queues.append(queue)
        self._tasks.append(asyncio.create_task(self._pump(segment, queue)))

    async def _pump(self, segment: Segment, queue: asyncio.Queue) -> None:
        try:
            async for chunk in self._client.synthesize(segment.text, self._voice, segment.params, speed=self._speed,
                                                       prompt=segment.prompt):
                queue.put_nowait(chunk)
        except Exception as exc:  # handed to the consumer, which raises it in order
            queue.put_nowait(exc)
