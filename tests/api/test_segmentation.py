"""A speech's segments: prepared in the pool one ahead of need, each fitting the context, dropped
when silent; and SegmentedSynthesis streaming them in order as one seamless stream."""
from __future__ import annotations

import asyncio
import re

import numpy as np
import pytest

from api.speech.planning import NothingToSpeak, PlannedText, SegmentPlanner
from api.speech.prompt_pool import PromptPool
from api.speech.spoken_budget import SECONDS_PER_CHAR
from api.config.settings import ApiSettings
from api.speech.synthesis import JOIN_FADE_SECONDS, Segment, SegmentedSynthesis
from api.speech.text_split import UncuttableText, plan_texts
from api.speech.voice_choice import VoiceChoice
from engine.outputs import AudioChunk, EngineLimits, RequestMetrics
from evaluation import eval_sentences
from model.config import ModelConfig
from model.families.base import PromptTooLong, SpeechPrompt
from model.loader import load_frontend
from model.sampling import SamplingParams
from model.text.ssml import SpeechPart
from model.tiny_random import ensure_tiny_random

V = VoiceChoice("v")
# Planning only multiplies budgets by the engine's rate; this is about Orpheus's.
RATE = 82.0


class LettersOnlyFrontend:
    """A front end that, like espeak, finds nothing to say in text without letters; one token per
    character, and as many outputs as tokens. Records every text it prepares."""

    def __init__(self) -> None:
        self.prepared: list[str] = []

    def default_sampling(self):
        return SamplingParams()

    def prepare(self, text, voice, speed=1.0, max_tokens=None, *, language=None, instructions=None):
        if max_tokens is not None and len(text) > max_tokens:
            raise PromptTooLong(len(text), max_tokens)  # counted before "preparing"
        self.prepared.append(text)
        if not any(c.isalpha() for c in text):
            raise ValueError(f"nothing to speak in {text!r}")
        return SpeechPrompt(token_ids=list(range(len(text))))

    def expected_outputs(self, prompt):
        return len(prompt.token_ids)


class RecordingPool(PromptPool):
    """Records each submission as (text, first)."""

    def __init__(self, prepare) -> None:
        super().__init__(prepare)
        self.submitted: list[tuple[str, bool]] = []

    def submit(self, text, voice, speed, *, arrival, index, first, max_tokens=None):
        self.submitted.append((text, first))
        return super().submit(text, voice, speed, arrival=arrival, index=index, first=first, max_tokens=max_tokens)


def planner(pool, frontend, context: int = 10_000, **settings) -> SegmentPlanner:
    return SegmentPlanner(pool, frontend, ApiSettings(**settings), EngineLimits(context, RATE))


async def handed_out(segments) -> list[Segment]:
    out = []
    while (segment := await segments.next()) is not None:
        out.append(segment)
    return out


def plan_all(text: str, frontend, context: int = 10_000, **settings) -> list[Segment]:
    async def main():
        async with PromptPool(frontend.prepare) as pool:
            return await handed_out(await planner(pool, frontend, context, **settings).plan(text, V))

    return asyncio.run(main())


def spoken_words(text: str) -> list[str]:
    return [word for word in text.split() if any(c.isalpha() for c in word)]


def test_pieces_with_nothing_to_speak_are_dropped_and_a_silent_input_is_refused():
    frontend = LettersOnlyFrontend()
    text = "... Hello there. ... " + " ".join(f"Sentence {i} is here." for i in range(6)) + " !?"

    async def main():
        async with RecordingPool(frontend.prepare) as pool:
            return await handed_out(await planner(pool, frontend).plan(text, V)), pool.submitted

    segments, submitted = asyncio.run(main())
    assert spoken_words(" ".join(s.text for s in segments)) == spoken_words(text)
    assert all(spoken_words(s.text) for s in segments)
    assert all(s.prompt.token_ids == list(range(len(s.text))) for s in segments)
    # Segment 0 has nothing to speak: the next one is what the first audio waits on.
    assert submitted[:3] == [("...", True), ("Hello there.", True), ("...", False)]
    assert len(frontend.prepared) == len(plan_texts(text, 30, 1000))  # each piece prepared once
    with pytest.raises(NothingToSpeak):
        plan_all("... ! ?", LettersOnlyFrontend())


def test_a_segment_too_long_for_the_context_is_cut_and_only_its_pieces_prepared():
    frontend = LettersOnlyFrontend()
    text = "Hi. " + " ".join(f"Sentence {i} is here, with a few more words than fit." for i in range(8))
    context = 60  # prompt + outputs = 2 per character: 30 characters per segment at most
    segments = plan_all(text, frontend, context)
    assert " ".join(s.text for s in segments).split() == text.split()
    assert all(2 * len(s.text) <= context for s in segments)
    planned = plan_texts(text, 30, 1000)
    assert all(any(piece in whole for whole in planned) for piece in frontend.prepared)


def test_a_prompt_over_the_token_limit_is_cut_before_it_is_prepared():
    frontend = LettersOnlyFrontend()
    # No sentence ends: only the word bound cuts it before preparation (150 words of 6 characters).
    text = " ".join(f"word{i % 10}" for i in range(400))
    settings = ApiSettings(max_prompt_tokens=120, first_segment_max_tokens=40)

    async def main():
        async with RecordingPool(frontend.prepare) as pool:
            planner = SegmentPlanner(pool, frontend, settings, EngineLimits(10_000, RATE))
            return await handed_out(await planner.plan(text, V)), pool.submitted

    segments, submitted = asyncio.run(main())
    assert " ".join(s.text for s in segments).split() == text.split()
    # The first segment within the first segment's bound, its first audio waits on it.
    assert len(segments[0].prompt.token_ids) <= 40 < len(segments[1].prompt.token_ids) <= 120
    assert all(len(s.prompt.token_ids) <= 120 for s in segments)
    assert all(len(prepared) <= 120 for prepared in frontend.prepared)  # nothing longer ever ran
    assert len(submitted) > len(segments)  # some were refused by count, and cut


def test_the_token_limit_leaves_room_for_an_output_in_the_context():
    frontend = LettersOnlyFrontend()
    settings = ApiSettings(max_prompt_tokens=1024, first_segment_max_tokens=256)
    assert SegmentPlanner(None, frontend, settings, EngineLimits(10_000, RATE)).token_limit(first=True) == 256
    assert SegmentPlanner(None, frontend, settings, EngineLimits(10_000, RATE)).token_limit(first=False) == 1024
    assert SegmentPlanner(None, frontend, settings, EngineLimits(50, RATE)).token_limit(first=False) == 49


class ThreeTokensPerCharacter(LettersOnlyFrontend):
    def prepare(self, text, voice, speed=1.0, max_tokens=None, *, language=None, instructions=None):
        if max_tokens is not None and 3 * len(text) > max_tokens:
            raise PromptTooLong(3 * len(text), max_tokens)
        return super().prepare(text, voice, speed)


def test_a_single_character_over_the_token_limit_is_refused():
    frontend = ThreeTokensPerCharacter()
    settings = ApiSettings(max_prompt_tokens=2, first_segment_max_tokens=2)

    async def main():
        async with PromptPool(frontend.prepare) as pool:
            return await handed_out(await SegmentPlanner(pool, frontend, settings, EngineLimits(10_000, RATE)).plan("ab", V))

    with pytest.raises(UncuttableText, match="'a' cannot be cut further .* makes a prompt of 3 tokens; at most 2"):
        asyncio.run(main())


class CountingPool(PromptPool):
    """Records each submission as (text, max_tokens)."""

    def __init__(self, prepare) -> None:
        super().__init__(prepare)
        self.submitted: list[tuple[str, int | None]] = []

    def submit(self, text, voice, speed, *, arrival, index, first, max_tokens=None):
        self.submitted.append((text, max_tokens))
        return super().submit(text, voice, speed, arrival=arrival, index=index, first=first, max_tokens=max_tokens)


def test_a_phoneme_run_over_the_first_segments_limit_is_prepared_once_more_under_the_later_limit():
    """A run is never cut: before, the cut gave the run back whole and the speech prepared it
    again and again, for minutes (a 250-symbol run on joe)."""
    frontend = ThreeTokensPerCharacter()
    run = "[[ " + "ə" * 20 + " ]]"  # 26 characters: 78 tokens

    async def main():
        async with CountingPool(frontend.prepare) as pool:
            segments = await planner(pool, frontend, first_segment_max_tokens=40, max_prompt_tokens=100).plan(run, V)
            return await handed_out(segments), pool.submitted

    segments, submitted = asyncio.run(main())
    assert [segment.text for segment in segments] == [run]
    assert submitted == [(run, 40), (run, 100)]


class OwnBoundFrontend(LettersOnlyFrontend):
    """A front end with a bound of its own below the planner's (joe's per sentence): its refusal
    names that bound, whatever limit it was asked for."""

    def prepare(self, text, voice, speed=1.0, max_tokens=None, *, language=None, instructions=None):
        if len(text) > 20:
            raise PromptTooLong(len(text), 20)
        return super().prepare(text, voice, speed)


def test_a_run_over_the_front_ends_own_bound_is_refused_not_prepared_forever():
    frontend = OwnBoundFrontend()
    run = "[[ " + "a " * 20 + "]]"

    async def main():
        async with CountingPool(frontend.prepare) as pool:
            try:
                await handed_out(await planner(pool, frontend).plan(run, V))
            finally:
                submitted.extend(pool.submitted)

    submitted: list = []
    with pytest.raises(UncuttableText, match="at most 20"):
        asyncio.run(main())
    assert len(submitted) == 2


def test_a_phoneme_run_over_every_limit_is_refused_after_two_preparations():
    frontend = ThreeTokensPerCharacter()
    run = "[[ " + "ə" * 40 + " ]]"  # 138 tokens

    async def main():
        async with CountingPool(frontend.prepare) as pool:
            segments = await planner(pool, frontend, first_segment_max_tokens=40, max_prompt_tokens=100).plan(
                f"{run} and more words after it.", V)
            try:
                await handed_out(segments)
            finally:
                submitted.extend(pool.submitted)

    submitted: list = []
    with pytest.raises(UncuttableText, match="makes a prompt of 138 tokens; at most 100"):
        asyncio.run(main())
    assert [text for text, _ in submitted].count(run) == 2


def test_a_run_too_long_to_cut_is_refused_before_any_preparation():
    frontend = LettersOnlyFrontend()
    with pytest.raises(UncuttableText):
        plan_all("Fine words, then " + "x" * 300, frontend)
    assert frontend.prepared == []


def test_tiny_random_segments_fit_the_context_with_their_text_budget(chorus_cache):
    frontend = load_frontend(ModelConfig(model=str(ensure_tiny_random())))
    fast = dict(audio_seconds_per_char=0.05, min_audio_seconds=0.5)
    text = " ".join(f"Sentence number {i} is here." for i in range(40))

    async def main():
        async with PromptPool(frontend.prepare) as pool:
            params = frontend.default_sampling().replace(seed=3)
            plan = await planner(pool, frontend, 600, **fast).plan(text, VoiceChoice("tara"), params=params)
            return await handed_out(plan)

    segments = asyncio.run(main())
    assert len(segments) > 1 and " ".join(s.text for s in segments) == text
    settings = ApiSettings(**fast)
    for segment in segments:
        assert len(segment.prompt.token_ids) + segment.params.max_tokens <= 600
        assert segment.params.max_tokens == settings.max_tokens_for(segment.text, RATE)
        assert segment.params.seed == 3


def test_one_segment_is_prepared_ahead_and_closing_drops_it():
    frontend = LettersOnlyFrontend()
    text = "One. Two. Three. Four."

    async def main():
        async with RecordingPool(frontend.prepare) as pool:
            segments = await planner(pool, frontend).plan(text, V)
            first = await segments.next()
            submitted = list(pool.submitted)
            segments.close()
            return first, submitted, pool

    first, submitted, pool = asyncio.run(main())
    assert first.text == "One."
    assert submitted == [("One.", True), ("Two.", False)]  # the next one, as a later segment
    assert pool.metrics.registry.get_sample_value("chorus_prompt_queue_depth", {"kind": "later"}) == 0
    assert frontend.prepared == ["One."]


def test_a_long_segment_has_the_next_prepared_only_when_it_is_asked_for():
    """Preparing the next segment while a long one waits for its first audio only slows that
    audio: the synthesis asks for the next when the long one starts streaming."""
    frontend = LettersOnlyFrontend()
    long = "This first sentence is long enough to speak for well over two seconds of audio."
    text = f"{long} Two. Three."

    async def main():
        async with RecordingPool(frontend.prepare) as pool:
            # One output per character: the long one speaks for len(long) / 20 = 4 s.
            segments = await SegmentPlanner(pool, frontend, ApiSettings(), EngineLimits(10_000, 20.0)).plan(text, V)
            first = await segments.next()
            at_first = list(pool.submitted)
            second = await segments.next()
            return first, at_first, second, list(pool.submitted)

    first, at_first, second, submitted = asyncio.run(main())
    assert (first.text, second.text) == (long, "Two. Three.")
    assert at_first == [(long, True)]  # a short first one has its next submitted here (test above)
    assert submitted == [(long, True), ("Two. Three.", False)]


class FakeEngine:
    """Yields `frames` chunks of constant value per segment (its text's last number), slowly,
    and records when each request starts (with how many prompts had been prepared by then, and
    whether it is a continuation), finishes or is abandoned."""

    sample_rate = 1000

    def __init__(self, frames: int = 4, samples: int = 100, frontend: LettersOnlyFrontend | None = None) -> None:
        self.frames, self.samples, self.frontend = frames, samples, frontend
        self.events: list[tuple[str, str]] = []
        self.starts: list[tuple[str, int, bool]] = []
        self.outputs_after: list[int] = []
        self.links: list[tuple[str, str | None]] = []  # (request id, the id it follows) per start
        self.arrivals: list[float | None] = []  # when its speech came, as each start was told
        self.speeds: list[float] = []  # the speed each request was started at

    def pause(self, request_id: str, paused: bool) -> None:
        self.events.append(("pause" if paused else "resume", request_id))

    async def synthesize(self, text, voice, params, request_id=None, speed=1.0, prompt=None, continuation=False,
                         outputs_after=0, follows=None, arrived=None):
        self.events.append(("start", text))
        self.speeds.append(speed)
        self.links.append((request_id, follows))
        self.arrivals.append(arrived)
        self.outputs_after.append(outputs_after)
        self.starts.append((text, len(self.frontend.prepared) if self.frontend else 0, continuation))
        try:
            for i in range(self.frames):
                await asyncio.sleep(0.01)
                last = i == self.frames - 1
                metrics = RequestMetrics(prompt_tokens=5, output_tokens=7 * self.frames) if last else None
                value = float(re.findall(r"\d+", text)[-1]) if re.search(r"\d", text) else 1.0
                yield AudioChunk(request_id or text, np.full(self.samples, value, np.float32), self.sample_rate, last,
                                 "length" if last else None, metrics=metrics)
            self.events.append(("finish", text))
        finally:
            if ("finish", text) not in self.events:
                self.events.append(("abort", text))


class ListSource:
    def __init__(self, segments: list[Segment]) -> None:
        self._segments = list(segments)
        self.closed = False

    async def next(self):
        return self._segments.pop(0) if self._segments else None

    def outputs_after(self) -> int:
        return 10 * len(self._segments)

    def close(self):
        self.closed = True

    def take_trailing_pause(self) -> float:
        return 0.0


def numbered(n: int) -> ListSource:
    return ListSource([Segment(f"segment {i + 1}", SamplingParams(), SpeechPrompt(token_ids=[i])) for i in range(n)])


async def stream(engine, source, arrived: float | None = None) -> tuple[np.ndarray, SegmentedSynthesis]:
    synthesis = SegmentedSynthesis(engine, source, "v")
    await synthesis.start(arrived=arrived)
    out = [pcm async for pcm in synthesis.pcm()]
    synthesis.close()
    return np.concatenate(out), synthesis


def test_segments_stream_in_order_without_gaps_and_next_starts_early():
    engine = FakeEngine()
    source = numbered(3)
    audio, synthesis = asyncio.run(stream(engine, source, arrived=12.5))
    assert audio.size == 3 * engine.frames * engine.samples  # nothing dropped, nothing inserted
    # Each segment's body (outside the join fades) is its own value: in order, no repetition.
    length, fade = engine.frames * engine.samples, int(JOIN_FADE_SECONDS * engine.sample_rate)
    for k in range(3):
        assert np.all(audio[k * length + fade:(k + 1) * length - fade] == k + 1)
    # Joins are faded to zero on both sides; the stream's own start and end are not.
    assert abs(audio[length - 1]) < 0.05 and abs(audio[length]) < 0.05
    assert audio[0] == 1.0 and audio[-1] == 3.0
    # The next segment's request started before the current one finished.
    order = engine.events
    assert order.index(("start", "segment 2")) < order.index(("finish", "segment 1"))
    assert order.index(("start", "segment 3")) < order.index(("finish", "segment 2"))
    assert synthesis.usage.as_dict() == {"input_tokens": 15, "output_tokens": 84, "total_tokens": 99}
    assert [continuation for *_, continuation in engine.starts] == [False, True, True]
    # Each later segment's request names the one its audio follows.
    ids = [request_id for request_id, _ in engine.links]
    assert len(set(ids)) == 3 and [follows for _, follows in engine.links] == [None, ids[0], ids[1]]
    # Only the first request's deadline counts from the speech's arrival (the others continue).
    assert engine.arrivals == [12.5, None, None]
    assert source.closed


def test_a_speech_that_continues_a_playing_stream_names_the_last_request_only_once_known():
    """A speak socket's next turn starts as a continuation following the turn before it; that
    turn names its request only once it is its last (the engine hands a followed request's
    planned rest to its follower, which is no part of another turn's)."""
    engine = FakeEngine()

    async def run() -> list:
        seen = []
        synthesis = SegmentedSynthesis(engine, numbered(2), "v")
        await synthesis.start(continuation=True, follows="turn-before")
        async for _ in synthesis.pcm():
            seen.append(synthesis.last_request_id)
        synthesis.close()
        return seen

    seen = asyncio.run(run())
    ids = [request_id for request_id, _ in engine.links]
    assert [follows for _, follows in engine.links] == ["turn-before", ids[0]]
    assert [continuation for *_, continuation in engine.starts] == [True, True]
    assert seen[0] is None and seen[-1] == ids[1]  # unknown while a segment could still follow


def test_the_first_request_starts_with_only_its_own_prompt_prepared():
    """The 30 benchmark sentences: the first engine request waits for the first sentence's prompt
    alone; every word is spoken once, in order, over the segments."""
    frontend = LettersOnlyFrontend()
    engine = FakeEngine(frames=2, frontend=frontend)
    text = " ".join(eval_sentences())

    async def main():
        async with PromptPool(frontend.prepare) as pool:
            return await stream(engine, await planner(pool, frontend).plan(text, V))

    asyncio.run(main())
    (first_text, prepared_by_then, continuation), *later = engine.starts
    assert first_text == eval_sentences()[0] and prepared_by_then == 1 and not continuation
    assert frontend.prepared[0] == first_text
    assert all(continuation for *_, continuation in later)
    assert " ".join(text for text, *_ in engine.starts).split() == text.split()
    # Each request tells admission what the rest of its speech will take: its later segments'
    # text at a conversational rate, down to nothing for the last.
    assert engine.outputs_after[-1] == 0 and engine.outputs_after == sorted(engine.outputs_after, reverse=True)
    rest = len(text) - len(first_text)
    assert engine.outputs_after[0] == pytest.approx(rest * SECONDS_PER_CHAR * RATE, rel=0.02)


def test_close_aborts_every_open_request():
    engine = FakeEngine(frames=50)
    source = numbered(3)

    async def run():
        synthesis = SegmentedSynthesis(engine, source, "v")
        await synthesis.start()
        async for _ in synthesis.pcm():
            break
        synthesis.close()
        await asyncio.sleep(0.05)

    asyncio.run(run())
    started = {text for kind, text in engine.events if kind == "start"}
    aborted = {text for kind, text in engine.events if kind == "abort"}
    assert "segment 1" in started and "segment 3" not in started
    assert aborted == started and source.closed
    assert not re.search("finish", str(engine.events))


def test_the_next_segment_starts_once_the_current_ones_first_chunk_is_handed_over():
    """Not beside it: preparing and starting the next segment would take the CPU from the first
    chunk's encoding and writing (an mp3 response's first bytes)."""
    engine = FakeEngine()
    seen: list[list[str]] = []

    async def run():
        synthesis = SegmentedSynthesis(engine, numbered(2), "v")
        await synthesis.start()
        async for _ in synthesis.pcm():
            await asyncio.sleep(0.003)  # the consumer encodes and writes (the engine's next chunk is 10 ms away)
            seen.append([text for kind, text in engine.events if kind == "start"])
        synthesis.close()

    asyncio.run(run())
    assert seen[0] == ["segment 1"]
    assert "segment 2" in seen[1]


# --- SSML's pauses and rates (api/speech/markup.py makes the parts) ------------------------------

def test_parts_plan_as_pieces_at_their_rate_with_each_pause_on_its_edge():
    parts = [SpeechPart("", pause_after=0.3), SpeechPart("One. Two.", rate=1.5, pause_after=0.5),
             SpeechPart("", pause_after=0.2), SpeechPart("", pause_after=0.1), SpeechPart("Three."),
             SpeechPart("", pause_after=0.4)]
    planned = planner(None, LettersOnlyFrontend()).planned_texts(parts)
    assert planned == [PlannedText("One.", 1.5, pause_before=0.3), PlannedText("Two.", 1.5, pause_after=0.5),
                       PlannedText("Three.", 1.0, pause_before=pytest.approx(0.3), pause_after=0.4)]
    assert planner(None, LettersOnlyFrontend()).planned_texts([SpeechPart("", pause_after=1.0)]) == []


def test_segments_carry_their_rate_and_pauses_and_a_silent_piece_passes_its_pause_on():
    frontend = LettersOnlyFrontend()
    parts = [SpeechPart("One.", rate=0.75, pause_after=0.5), SpeechPart("...", pause_after=0.3),
             SpeechPart("Two."), SpeechPart("!!!", pause_after=0.4)]

    async def main():
        async with RecordingPool(frontend.prepare) as pool:
            segments = await planner(pool, frontend).plan(parts, V, speed=2.0)
            return await handed_out(segments), segments.take_trailing_pause(), segments.take_trailing_pause()

    segments, trailing, again = asyncio.run(main())
    assert [(s.text, s.rate, s.pause_before, s.pause_after) for s in segments] == [
        ("One.", 0.75, 0.0, 0.5), ("Two.", 1.0, 0.3, 0.0)]
    assert (trailing, again) == (0.4, 0.0)  # the last piece said nothing: its pause ends the speech, once


def test_pauses_are_exact_silence_between_faded_segment_edges_and_rates_reach_the_engine():
    engine = FakeEngine()  # 1 kHz, 4 chunks of 100 samples a segment
    source = ListSource([
        Segment("segment 1", SamplingParams(), SpeechPrompt(token_ids=[0]), rate=0.5, pause_before=0.2,
                pause_after=0.5),
        Segment("segment 2", SamplingParams(), SpeechPrompt(token_ids=[1]), rate=2.0),
    ])

    async def run():
        synthesis = SegmentedSynthesis(engine, source, "v", speed=1.5)
        await synthesis.start()
        out = np.concatenate([pcm async for pcm in synthesis.pcm()])
        synthesis.close()
        return out, synthesis.position

    audio, position = asyncio.run(run())
    length, fade = engine.frames * engine.samples, int(JOIN_FADE_SECONDS * engine.sample_rate)
    assert audio.size == position == 200 + length + 500 + length
    assert np.all(audio[:200] == 0)  # the pause before the speech's first words
    assert np.all(audio[200 + fade:200 + length - fade] == 1)
    assert abs(audio[200 + length - 1]) < 0.05  # faded out into the pause, not cut
    assert np.all(audio[200 + length:200 + length + 500] == 0)
    assert 0 < audio[200 + length + 500 + 1] < 1 and np.all(audio[-length + fade:] == 2)  # faded in after it
    assert engine.speeds == [0.75, 3.0]


def test_a_phoneme_run_is_never_cut_between_segments():
    # The first segment is cut after 30 words, which here falls inside the run.
    words = [f"w{i}" for i in range(28)]
    text = " ".join(words) + " [[ a b c d e ]] " + " ".join(f"v{i}" for i in range(40)) + "."
    texts = planner(None, LettersOnlyFrontend()).texts(text)
    assert " ".join(texts) == text
    assert all(piece.count("[[") == piece.count("]]") for piece in texts)
