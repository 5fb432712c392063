"""Turns one speech's text into engine requests that each fit the model's context: segments cut
by text alone (api/speech/text_split.py), each prepared in the prompt pool only when its turn is near."""
from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, replace
from typing import Sequence

from api.speech.prompt_pool import PromptPool
from api.config.settings import ApiSettings
from api.speech.spoken_budget import SECONDS_PER_CHAR, SpokenBudget
from api.speech.synthesis import Segment
from api.speech.text_split import UncuttableText, UnspeakableText, check_runs, cut_near, plan_texts
from api.speech.voice_choice import VoiceChoice
from engine.outputs import EngineLimits
from model.families.base import OptionRefused, PromptFrontend, PromptTooLong, SpeechPrompt, VoiceNotFoundError
from model.text.inline_phonemes import join_split_phoneme_runs, keep_phoneme_runs_whole
from model.text.ssml import SpeechPart
from model.sampling import SamplingParams

# A too-long segment is cut this far below the share of it that would fit, so that the head
# fits the first time despite the prompt's length not being exactly proportional to the text's.
_CUT_MARGIN = 0.9
# A segment expected to speak for less than this has the next one prepared as soon as it is
# handed out; a longer one only when it starts streaming (when the synthesis asks for the next),
# so that preparing the next does not take the CPU from its first audio. From then on the next
# has this long, less its own first audio, to be ready: preparing a sentence took 24 ms idle and
# up to ~200 ms at 16 streams on the 2-core machine, its first audio about as much again.
PREPARE_AHEAD_BELOW_SECONDS = 1.5


class NothingToSpeak(UnspeakableText):
    """No segment of the speech has anything the front end can speak (only punctuation)."""


# What `_prepared` returns for a piece whose prompt was over the token limit: it has been cut,
# or (one that cannot be cut) is to be prepared again under the later segments' higher limit.
_REPLACED = object()


@dataclass(slots=True)
class _Planned:
    text: str
    index: int  # the planned segment it is (a piece of): its place in the order of need
    job: asyncio.Future | None = None
    rate: float = 1.0  # its speed, relative to the speech's (SSML's prosody rate)
    pause_before: float = 0.0  # seconds of silence before and after its audio (SSML's breaks)
    pause_after: float = 0.0
    # It cannot be cut (one character, or one phoneme run, which is never cut): even as a
    # speech's first segment it is prepared as a later segment is (`_submit`).
    uncut: bool = False


@dataclass(frozen=True, slots=True)
class PlannedText:
    """A segment's text before preparation, with how it is said: `rate` times the speech's
    speed, `pause_before` / `pause_after` seconds of silence around it (each ≥ 0)."""

    text: str
    rate: float = 1.0
    pause_before: float = 0.0
    pause_after: float = 0.0


class SpeechSegments:
    """One speech's segments, prepared in order, each when the one before it is handed out if
    that one is short (PREPARE_AHEAD_BELOW_SECONDS), else when `next` asks for it.
    Invariants: `next` hands out the text's segments in order, each once, each with a prompt
    that fits the engine's context and the prompt-token limit (a segment whose prompt would not
    is cut, and only its pieces are prepared again; every cut leaves two shorter pieces, so a
    text is prepared at most about twice its number of segments; a piece that cannot be cut (a
    single character, a phoneme run) is prepared once more under the later segments' limit if it
    was a first segment, and over that raises UncuttableText); pieces with nothing to speak are
    dropped, and if every piece is, the first `next` raises NothingToSpeak; at most one segment
    is prepared ahead of those handed out; `close` cancels every preparation still pending.

    A live speech (`complete=False`: text still arriving, e.g. over the speak WebSocket) gets
    its texts through `extend` and ends with `finish`; until then `next` waits for more.
    """

    def __init__(self, planner: SegmentPlanner, texts: list[str | PlannedText], voice: VoiceChoice, speed: float,
                 params: SamplingParams, complete: bool = True) -> None:
        self._planner = planner
        self._voice = voice
        self._speed = speed
        self._params = params
        self._arrival = planner.pool.next_arrival()
        self._pending: deque[_Planned] = deque()
        self._planned = 0
        self._handed_out = 0
        self._complete = complete
        self._more = asyncio.Event()
        self._trailing_pause = 0.0
        self.extend(texts)

    def extend(self, texts: list[str | PlannedText]) -> None:
        """More text of a live speech, in order (its preparation starts now if it is next)."""
        if self._complete and self._planned:
            raise RuntimeError("the speech is complete: no more text")
        for text in texts:
            if isinstance(text, str):
                self._pending.append(_Planned(text, self._planned))
            else:
                self._pending.append(_Planned(text.text, self._planned, rate=text.rate,
                                              pause_before=text.pause_before, pause_after=text.pause_after))
            self._planned += 1
        if texts and self._handed_out:
            self._submit(self._pending[0])  # the next one is needed as soon as the last ends
        self._more.set()

    def finish(self) -> None:
        """No more text: `next` returns None once the texts already given are handed out."""
        self._complete = True
        self._more.set()

    async def next(self) -> Segment | None:
        """The next segment, prepared; None after the last (of a live speech: once finished)."""
        while True:
            while self._pending:
                planned = self._pending[0]
                prompt = await self._prepared(planned)
                if prompt is _REPLACED:
                    continue  # its pieces have taken its place
                self._pending.popleft()
                segment = None if prompt is None else self._fitted(planned, prompt)
                if segment is not None:
                    self._handed_out += 1
                    if self._pending and self._spoken_seconds(segment) < PREPARE_AHEAD_BELOW_SECONDS:
                        self._submit(self._pending[0])  # ahead of need: ready before this one ends
                    return segment
            if self._complete:
                break
            self._more.clear()
            await self._more.wait()
        if not self._handed_out:
            raise NothingToSpeak("nothing to speak in the input")
        return None

    def outputs_after(self) -> int:
        chars = sum(len(planned.text) for planned in self._pending)
        # What the segments not prepared yet are expected to take, at conversational English's rate.
        return round(chars * SECONDS_PER_CHAR * self._planner.limits.outputs_per_second)

    def close(self) -> None:
        for planned in self._pending:
            if planned.job is not None:
                planned.job.cancel()

    def _fitted(self, planned: _Planned, prompt: SpeechPrompt) -> Segment | None:
        """The segment when its prompt and outputs fit the context, or when it cannot be cut (the
        engine then refuses it by name); else None, its text cut in two pieces that take its place
        at the front."""
        budget = self._output_budget(planned.text)
        expected = self._planner.frontend.expected_outputs(prompt)
        needed = len(prompt.token_ids) + (budget if expected is None else expected)
        context = self._planner.limits.context_tokens
        if needed <= context or not self._cut(planned, context / needed):
            return Segment(planned.text, self._params.replace(max_tokens=budget), prompt, rate=planned.rate,
                           pause_before=planned.pause_before, pause_after=planned.pause_after)
        return None

    def _cut(self, planned: _Planned, share: float) -> bool:
        """Puts the two pieces of `planned` (the first about `share` of it) in its place at the
        front of the queue (it must have been popped already), and returns True; False, with the
        queue as it was, when it cannot be cut in two (one character, or one phoneme run: the cut
        would leave it whole)."""
        head, tail = cut_near(planned.text, int(len(planned.text) * share * _CUT_MARGIN))
        head, tail = keep_phoneme_runs_whole(head, tail)
        if not head or not tail:
            return False
        # The pauses stay at the outer edges; both pieces keep the rate.
        self._pending.extendleft([
            _Planned(tail, planned.index, rate=planned.rate, pause_after=planned.pause_after),
            _Planned(head, planned.index, rate=planned.rate, pause_before=planned.pause_before),
        ])
        return True

    def _submit(self, planned: _Planned) -> None:
        if planned.job is None:
            # NOTE: a first segment that cannot be cut, over the first segment's bound, goes as a later
            # one: under the later bound, and behind other speeches' first segments, whose first audio
            # should not wait on an unusually long preparation.
            first = not self._handed_out and not planned.uncut
            planned.job = self._planner.pool.submit(
                planned.text, self._voice, self._speed * planned.rate, arrival=self._arrival, index=planned.index,
                first=first, max_tokens=self._planner.token_limit(first),
            )

    async def _prepared(self, planned: _Planned):
        """The piece's prompt; None when the front end finds nothing to speak in it; _REPLACED when
        its prompt would be over the token limit, and its pieces (or, uncut, itself) have taken its
        place. What the front end refuses whatever the text (the voice, the language, the
        instructions) is raised."""
        self._submit(planned)
        try:
            return await planned.job
        except (VoiceNotFoundError, OptionRefused):
            raise
        except PromptTooLong as exc:
            self._pending.popleft()
            if self._cut(planned, exc.limit / exc.tokens):
                return _REPLACED
            if not planned.uncut and exc.limit < self._planner.token_limit(first=False):
                # A first segment that cannot be cut: its first audio waits on a longer preparation.
                # (Once only: a front end's own bound, such as joe's per sentence, may be the lower.)
                self._pending.appendleft(replace(planned, job=None, uncut=True))
                return _REPLACED
            raise UncuttableText(f"{_quoted_piece(planned.text)} cannot be cut further (one character, or a phoneme "
                                 f"run, which is said whole) and makes a prompt of {exc.tokens} tokens; at most "
                                 f"{exc.limit}") from None
        except ValueError:
            if planned.pause_before or planned.pause_after:
                return self._pause_only(planned)
            return None

    def _pause_only(self, planned: _Planned) -> None:
        """A piece with nothing to speak but pauses (say, "..." between two breaks): its pauses
        move to the piece after it or, when none follows yet, to the speech's end
        (`take_trailing_pause`)."""
        pause = planned.pause_before + planned.pause_after
        if len(self._pending) > 1:
            self._pending[1].pause_before += pause
        else:
            self._trailing_pause += pause
        return None

    def take_trailing_pause(self) -> float:
        """Seconds of silence the speech ends with beyond its last segment's own (a break after
        its last words that had no segment of its own to ride on); counted once."""
        pause, self._trailing_pause = self._trailing_pause, 0.0
        return pause

    def _spoken_seconds(self, segment: Segment) -> float:
        expected = self._planner.frontend.expected_outputs(segment.prompt)
        if expected is None:
            return len(segment.text) * SECONDS_PER_CHAR
        return expected / self._planner.limits.outputs_per_second

    def _output_budget(self, text: str) -> int:
        """The text's output budget (what an Orpheus request may produce), within the params'."""
        rate = self._planner.limits.outputs_per_second
        return min(self._params.max_tokens, self._planner.settings.max_tokens_for(text, rate))


def _quoted_piece(text: str, longest: int = 40) -> str:
    return repr(text if len(text) <= longest else text[:longest] + "…")


class SegmentPlanner:
    """Plans every speech of one engine: the text cut and the segment sizes from `settings`, the
    fit against the engine's `limits`, the prompts from `pool`. Holds no per-speech state."""

    def __init__(self, pool: PromptPool, frontend: PromptFrontend, settings: ApiSettings,
                 limits: EngineLimits) -> None:
        self.pool = pool
        self.frontend = frontend
        self.settings = settings
        self.limits = limits
        self.spoken_budget = SpokenBudget(settings.max_spoken_chars, settings.max_speech_seconds)

    async def plan(self, text: str | Sequence[SpeechPart], voice: VoiceChoice, speed: float = 1.0,
                   params: SamplingParams | None = None, heard_speed: float | None = None) -> SpeechSegments:
        """The speech's segments, none prepared yet: of a plain text, or of parts said each at its
        own rate with pauses after (api/speech/markup.py makes them of SSML), prepared at `speed`
        and heard at `heard_speed` (the request's, once the audio pipeline has stretched the rest;
        default `speed`). `params` (default: the model's) apply to every segment, each with its
        own output budget. The text is counted against the spoken budget and cut on a worker
        thread (its cost grows with the text; the event loop serves every other stream). Raises
        SpeechTooLong for a speech over the budget, UncuttableText for a text with a run of
        characters too long to cut."""
        parts = [SpeechPart(text)] if isinstance(text, str) else text

        def budgeted_texts() -> list[PlannedText]:
            self.spoken_budget.check(parts, speed if heard_speed is None else heard_speed)
            return self.planned_texts(parts)

        texts = await asyncio.to_thread(budgeted_texts)
        return SpeechSegments(self, texts, voice, speed, params or self.frontend.default_sampling())

    def planned_texts(self, parts: Sequence[SpeechPart]) -> list[PlannedText]:
        """The parts' segments in order: each part cut as `texts` cuts a text (the first part's
        first segment is the speech's first), every piece at its part's rate, the part's pause
        after its last piece; a pause with no text before it goes before the next piece (or,
        with no text at all after it either, after the last)."""
        planned: list[PlannedText] = []
        waiting = 0.0  # pauses with no text before them since the last piece
        for part in parts:
            pieces = self.texts(part.text) if part.text.strip() else []
            if not pieces:
                waiting += part.pause_after
                continue
            for k, piece in enumerate(pieces):
                planned.append(PlannedText(piece, part.rate, pause_before=waiting if k == 0 else 0.0,
                                           pause_after=part.pause_after if k == len(pieces) - 1 else 0.0))
            waiting = 0.0
        if waiting and planned:
            last = planned[-1]
            planned[-1] = PlannedText(last.text, last.rate, last.pause_before, last.pause_after + waiting)
        return planned

    def token_limit(self, first: bool) -> int:
        """The most tokens a segment's prompt may have: the settings' bound on preparation's cost
        (a lower one for a speech's first segment, whose first audio waits on it, as any speech's
        arriving after it does), always with room for an output in the engine's context."""
        bound = self.settings.first_segment_max_tokens if first else self.settings.max_prompt_tokens
        return max(1, min(bound, self.limits.context_tokens - 1))

    def texts(self, text: str) -> list[str]:
        """`text` cut into segments within the settings' bounds (linear in the text)."""
        settings = self.settings
        check_runs(text, settings.max_word_chars)
        texts = plan_texts(text, settings.first_segment_max_words, settings.max_segment_chars, settings.max_segment_words)
        return join_split_phoneme_runs(texts) if "[[" in text else texts

    def plan_live(self, voice: VoiceChoice, speed: float = 1.0,
                  params: SamplingParams | None = None) -> SpeechSegments:
        """A speech whose text arrives while it plays: `extend` it with ready segments (cut by
        api/speech/text_stream.py) and `finish` it."""
        return SpeechSegments(self, [], voice, speed, params or self.frontend.default_sampling(), complete=False)
