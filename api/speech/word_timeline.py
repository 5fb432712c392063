"""Where a speech's words fall in the audio a client receives, told as that audio leaves.

Each segment's prompt says where its words are in the segment's own audio (model seconds). The
synthesis places each segment where its audio begins in the joined stream (joins keep every
sample, so that is the sum of the segments before it); the response's tempo stretch divides
every time; a stream that carries several speeches (the speak WebSocket's turns) adds where
this one began in it.
"""
from __future__ import annotations

from collections import deque

from model.families.base import SpokenWord


class WordTimeline:
    """A speech's words in order of their start. Invariant: `reached(t)` returns each word
    once, in order, as soon as the first t seconds of the joined audio include its start;
    `remaining` returns the rest, also once."""

    def __init__(self, sample_rate: int) -> None:
        self.sample_rate = sample_rate
        self._waiting: deque[tuple[int, SpokenWord]] = deque()

    def add_segment(self, start_sample: int, words: tuple[SpokenWord, ...]) -> None:
        """The words of the segment whose audio begins at `start_sample` of the joined stream
        (segments are added in order, each before any of its audio is taken)."""
        offset = start_sample / self.sample_rate
        for word in words:
            placed = SpokenWord(word.word, offset + word.start, offset + word.end)
            self._waiting.append((start_sample + round(word.start * self.sample_rate), placed))

    def reached(self, seconds: float) -> list[SpokenWord]:
        """The words not told yet that start within the first `seconds` of the joined audio."""
        samples = round(seconds * self.sample_rate)  # whole samples, through float math
        told = []
        while self._waiting and self._waiting[0][0] < samples:
            told.append(self._waiting.popleft()[1])
        return told

    def remaining(self) -> list[SpokenWord]:
        told = [word for _, word in self._waiting]
        self._waiting.clear()
        return told


def word_events(words: list[SpokenWord], stretch: float = 1.0, offset: float = 0.0) -> list[dict]:
    """JSON-ready words in the client's time: model seconds divided by the tempo `stretch`
    (the response's speed over the model's), plus `offset` seconds of audio sent before."""
    return [
        {"word": w.word, "start": round(offset + w.start / stretch, 3), "end": round(offset + w.end / stretch, 3)}
        for w in words
    ]
