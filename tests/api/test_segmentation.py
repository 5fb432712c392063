"""Long inputs: sentence splitting, planning against the context, and seamless ordered streaming."""
from __future__ import annotations

import asyncio
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api.planning import plan_segments
from api.settings import ApiSettings
from api.synthesis import JOIN_FADE_SECONDS, Segment, SegmentedSynthesis
from api.text_split import split_text
from engine.outputs import AudioChunk, EngineLimits, RequestMetrics
from model.config import ModelConfig
from model.families.base import SpeechPrompt
from model.loader import load_frontend
from model.sampling import SamplingParams
from model.tiny_random import ensure_tiny_random

WORDS = st.text(alphabet="abcdefghij", min_size=1, max_size=12)
# Planning only multiplies budgets by the engine's rate; this is about Orpheus's.
RATE = 82.0
SENTENCES = st.lists(
    st.tuples(st.lists(WORDS, min_size=1, max_size=8), st.sampled_from([".", "!", "?", ",", ";", ""])),
    min_size=1, max_size=12,
)


@settings(max_examples=150, deadline=None)
@given(SENTENCES, st.integers(min_value=12, max_value=80))
def test_split_keeps_every_word_once_in_order_and_each_segment_fits(sentences, limit):
    text = " ".join(" ".join(words) + end for words, end in sentences)
    segments = split_text(text, lambda s: len(s) <= limit)
    assert "".join(segments).replace(" ", "") == text.replace(" ", "")  # nothing lost or repeated
    assert all(len(s) <= limit for s in segments)
    if all(len(word) <= limit for word in text.split()):  # words are only cut when they must be
        assert " ".join(segments).split() == text.split()


def test_split_prefers_sentence_boundaries():
    text = "First sentence here. Second one follows! Third, with a clause; and more."
    assert split_text(text, lambda s: len(s) <= 45) == ["First sentence here. Second one follows!", "Third, with a clause; and more."]
    assert split_text(text, lambda s: len(s) <= 25) == ["First sentence here.", "Second one follows!", "Third, with a clause;", "and more."]


class LettersOnlyFrontend:
    """A front end that, like espeak, finds nothing to say in text without letters."""

    def default_sampling(self):
        return SamplingParams()

    def __init__(self) -> None:
        self.prepared: list[str] = []

    def prepare(self, text, voice, speed=1.0):
        self.prepared.append(text)
        if not any(c.isalpha() for c in text):
            raise ValueError(f"nothing to speak in {text!r}")
        return SpeechPrompt(token_ids=list(range(len(text))))

    def expected_outputs(self, prompt):
        return len(prompt.token_ids)


def test_pieces_with_nothing_to_speak_are_dropped_not_fatal():
    settings = ApiSettings()
    dots = "... " * 8  # too long to share a segment with a sentence: it becomes one of its own
    text = dots + " ".join(f"Sentence {i} is here." for i in range(6)) + " " + dots
    assert "Sentence" not in split_text(text, lambda s: len(s) <= 30)[0]
    frontend = LettersOnlyFrontend()
    limits = EngineLimits(context_tokens=60, outputs_per_second=RATE)
    segments = plan_segments(text, "v", frontend, settings, limits)
    assert len(segments) > 1 and all(any(c.isalpha() for c in s.text) for s in segments)
    # Each segment carries the prompt planning prepared for it, prepared once per piece.
    assert all(s.prompt.token_ids == list(range(len(s.text))) for s in segments)
    assert len(frontend.prepared) == len(set(frontend.prepared))
    assert " ".join(s.text for s in segments).count("Sentence") == 6
    with pytest.raises(ValueError, match="nothing to speak"):
        plan_segments("... !", "v", LettersOnlyFrontend(), settings, limits)


def test_plan_fits_each_segment_into_the_context(chorus_cache):
    frontend = load_frontend(ModelConfig(model=str(ensure_tiny_random())))
    settings = ApiSettings(audio_seconds_per_char=0.05, min_audio_seconds=0.5)
    text = " ".join(f"Sentence number {i} is here." for i in range(40))
    limits = EngineLimits(context_tokens=600, outputs_per_second=RATE)
    segments = plan_segments(text, "tara", frontend, settings, limits, seed=3)
    assert len(segments) > 1
    assert " ".join(s.text for s in segments) == text
    for segment in segments:
        prompt = len(frontend.prepare(segment.text, "tara").token_ids)
        assert prompt + segment.params.max_tokens <= limits.context_tokens
        assert segment.params.max_tokens == settings.max_tokens_for(segment.text, RATE)
        assert segment.params.seed == 3
    assert len(plan_segments("Short.", "tara", frontend, settings, limits)) == 1


class FakeEngine:
    """Yields `frames` chunks of constant value per segment (value = segment index + 1), slowly,
    and records when each request starts, finishes or is abandoned."""

    sample_rate = 1000

    def __init__(self, frames: int = 4, samples: int = 100) -> None:
        self.frames, self.samples = frames, samples
        self.events: list[tuple[str, str]] = []
        self.prompts: list = []

    async def synthesize(self, text, voice, params, speed=1.0, prompt=None):
        self.events.append(("start", text))
        self.prompts.append(prompt)
        try:
            for i in range(self.frames):
                await asyncio.sleep(0.01)
                last = i == self.frames - 1
                metrics = RequestMetrics(prompt_tokens=5, output_tokens=7 * self.frames) if last else None
                value = float(text.split()[-1])
                yield AudioChunk(text, np.full(self.samples, value, np.float32), self.sample_rate, last, "length" if last else None, metrics=metrics)
            self.events.append(("finish", text))
        finally:
            if ("finish", text) not in self.events:
                self.events.append(("abort", text))


def segments(n: int) -> list[Segment]:
    return [Segment(f"segment {i + 1}", SamplingParams(), SpeechPrompt(token_ids=[i])) for i in range(n)]


def test_segments_stream_in_order_without_gaps_and_next_starts_early():
    engine = FakeEngine()

    async def run():
        synthesis = SegmentedSynthesis(engine, segments(3), "tara")
        await synthesis.start()
        out = [pcm async for pcm in synthesis.pcm()]
        synthesis.close()
        return np.concatenate(out), synthesis.usage

    audio, usage = asyncio.run(run())
    assert audio.size == 3 * engine.frames * engine.samples  # nothing dropped, nothing inserted
    # Each segment's body (outside the join fades) is its own value: in order, no repetition.
    length, fade = engine.frames * engine.samples, int(JOIN_FADE_SECONDS * engine.sample_rate)
    for k in range(3):
        assert np.all(audio[k * length + fade:(k + 1) * length - fade] == k + 1)
    # Joins are faded to zero on both sides; the stream's own start and end are not.
    join = engine.frames * engine.samples
    assert abs(audio[join - 1]) < 0.05 and abs(audio[join]) < 0.05
    assert audio[0] == 1.0 and audio[-1] == 3.0
    # The next segment's request started before the current one finished.
    order = engine.events
    assert order.index(("start", "segment 2")) < order.index(("finish", "segment 1"))
    assert order.index(("start", "segment 3")) < order.index(("finish", "segment 2"))
    assert usage.as_dict() == {"input_tokens": 15, "output_tokens": 84, "total_tokens": 99}
    assert [p.token_ids for p in engine.prompts] == [[0], [1], [2]]  # planning's prompts reach the engine


def test_close_aborts_every_open_request():
    engine = FakeEngine(frames=50)

    async def run():
        synthesis = SegmentedSynthesis(engine, segments(3), "tara")
        await synthesis.start()
        async for _ in synthesis.pcm():
            break
        synthesis.close()
        await asyncio.sleep(0.05)

    asyncio.run(run())
    started = {text for kind, text in engine.events if kind == "start"}
    aborted = {text for kind, text in engine.events if kind == "abort"}
    assert "segment 1" in started and "segment 3" not in started
    assert aborted == started
    assert not re.search("finish", str(engine.events))
