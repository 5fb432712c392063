"""No text costs more than linear time to prepare: long runs of each class of symbol (letters,
digits, punctuation, money, dates, times, ideographs, emoji, combining marks, right-to-left
script, phonemes written inline, with or without spaces) through everything a speech's text goes
through before the engine sees it, on the built-in voice (its front end reads the most:
normalization, espeak, phoneme runs, word alignment): SSML and pronunciations, the spoken budget,
the cut into segments, each segment's preparation.

Before, a 250-symbol phoneme run was prepared again and again for minutes (its prompt over the
first segment's token limit, and a cut that gave it back whole). Two bounds hold each case: the
preparations a speech makes (at most two per segment it hands out, plus the refused one), and a
time bound per character far above what any path takes on the 2-core machine (~7 ms a character
at most) and far below a loop's (~800 ms a character).
"""
from __future__ import annotations

import asyncio
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.voice_packages import require_voice_packages

require_voice_packages()

from api.config.settings import ApiSettings  # noqa: E402
from api.speech.errors import SpeechError  # noqa: E402
from api.speech.markup import speech_parts  # noqa: E402
from api.speech.planning import SegmentPlanner  # noqa: E402
from api.speech.prompt_pool import PromptPool  # noqa: E402
from api.speech.text_split import UnspeakableText  # noqa: E402
from api.speech.voice_choice import VoiceChoice  # noqa: E402
from engine.outputs import EngineLimits  # noqa: E402
from model.config import ModelConfig  # noqa: E402
from model.families.base import PhonemesRefused  # noqa: E402
from model.loader import load_frontend  # noqa: E402
from model.text.lexicon import Lexicon  # noqa: E402

SECONDS_PER_CHAR = 0.025
SETTLING_SECONDS = 1.0
# One symbol (or a few) of each class, repeated into a run, with or without a space after each.
SYMBOLS = ["a", "ab", "1", "12345", ".", "-", "!?", "$1", "1/2", "3:45", "Dr.", "中", "😀", "e\u0301", "ש", "ə", "ˈə",
           "[[", "<", "&"]
RUNS = st.tuples(st.sampled_from(SYMBOLS), st.integers(1, 256), st.sampled_from(["", " "]), st.booleans())


def as_text(symbol: str, length: int, space: str, inline: bool) -> str:
    """The run; `inline`: written as phonemes inline (`[[ ... ]]`), which joe reads as its own."""
    run = ((symbol + space) * length)[:256 if not space else 4000].strip() or symbol
    return f"[[ {run} ]]" if inline else run


class CountingPool(PromptPool):
    def __init__(self, prepare) -> None:
        super().__init__(prepare)
        self.submitted = 0

    def submit(self, *args, **kwargs):
        self.submitted += 1
        return super().submit(*args, **kwargs)


@pytest.fixture(scope="module")
def frontend():
    return load_frontend(ModelConfig(model="joe"))


async def prepare_all(frontend, text: str) -> tuple[int, int, str]:
    """Prepares every segment of `text` as a speech would: (segments planned or handed out,
    preparations, outcome)."""
    async with CountingPool(frontend.prepare) as pool:
        planner = SegmentPlanner(pool, frontend, ApiSettings(), EngineLimits(4096, 86.0))
        handed_out = planned = 0
        try:
            parts = speech_parts(text, frontend, Lexicon.of(()), 1.0)
            planned = len(planner.planned_texts(parts))
            segments = await planner.plan(parts, VoiceChoice("joe"))
            while await segments.next() is not None:
                handed_out += 1
            outcome = "spoken"
        except (UnspeakableText, PhonemesRefused) as exc:  # a 400 on every route
            outcome = "refused"
        except SpeechError as exc:  # phonemes the voice has no ids for: a 400 naming them
            outcome = "refused" if exc.status == 400 else f"{exc.status} {exc}"
        return max(planned, handed_out), pool.submitted, outcome


def test_every_class_of_run_costs_linear_time(frontend):
    @settings(max_examples=45, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(RUNS)
    def case(run) -> None:
        text = as_text(*run)
        started = time.perf_counter()
        handed_out, preparations, outcome = asyncio.run(prepare_all(frontend, text))
        took = time.perf_counter() - started
        shown = f"{text[:40]!r}… ({len(text)} characters): {outcome}"
        assert outcome in ("spoken", "refused"), shown
        assert preparations <= 2 * handed_out + 2, f"{preparations} preparations for {handed_out} segments of {shown}"
        assert took <= SETTLING_SECONDS + SECONDS_PER_CHAR * len(text), f"{took:.1f} s for {shown}"

    case()


def test_the_issues_run_is_spoken_once_prepared_twice(frontend):
    """`[[ ə × 250 ]]`: 503 phoneme ids, over the first segment's 384, within the later 2,560."""
    handed_out, preparations, outcome = asyncio.run(prepare_all(frontend, "[[ " + "ə" * 250 + " ]]"))
    assert (handed_out, preparations, outcome) == (1, 2, "spoken")
