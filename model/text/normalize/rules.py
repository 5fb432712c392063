"""What a normalization rule sees and says.

A rule is a function `(words, i) -> Reading | None`: given the text's words and the index of the
one being read, it either declines (None) or says how to read that word and possibly the ones
after it. Rules see the words before `i` as written (to use them as context), never as read.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Sequence

# Punctuation that may open or close a written word without being part of what it says.
_WORD = re.compile(r"([\"'(\[{“‘«¡¿]*)(.*?)([\"')\]}”’».,!?;:…]*)", re.DOTALL)


@dataclass(frozen=True, slots=True)
class Word:
    """One whitespace-delimited word of the text. Invariant: lead + core + trail == text, where
    lead and trail are the opening and closing punctuation around what the word says."""

    text: str
    lead: str
    core: str
    trail: str

    @classmethod
    def of(cls, text: str) -> "Word":
        lead, core, trail = _WORD.fullmatch(text).groups()
        return cls(text, lead, core, trail)

    def say(self, spoken: str) -> str:
        """`spoken` in place of the core, the word's punctuation around it."""
        return f"{self.lead}{spoken}{self.trail}"

    def say_abbreviation(self, spoken: str, keep_period: bool) -> str:
        """`spoken` in place of an abbreviation whose own period opens the trail: the period goes
        (it would end a sentence in the voice's ears) unless `keep_period`."""
        trail = self.trail if keep_period or not self.trail.startswith(".") else self.trail[1:]
        return f"{self.lead}{spoken}{trail}"

    @property
    def is_capitalized(self) -> bool:
        return self.core[:1].isupper()


@dataclass(frozen=True, slots=True)
class Reading:
    """How `count` consecutive words are said. Invariant: `spoken` has one entry per word, each
    the full replacement of that word in the text (its punctuation included), in order; or, when
    speech reorders them ("USD 20" → "twenty US dollars"), one entry for the whole run, which
    then counts as one written word."""

    count: int
    spoken: tuple[str, ...]

    def __post_init__(self) -> None:
        if self.count < 1 or len(self.spoken) not in (1, self.count):
            raise ValueError(f"a reading of {self.count} words cannot say {len(self.spoken)} things")

    @classmethod
    def each(cls, *spoken: str) -> "Reading":
        return cls(len(spoken), spoken)

    @classmethod
    def whole(cls, count: int, spoken: str) -> "Reading":
        return cls(count, (spoken,))


Rule = Callable[[Sequence[Word], int], "Reading | None"]


def ends_sentence(words: Sequence[Word], i: int) -> bool:
    """Whether a period after word i likely ends a sentence: it is the last word, or the next one
    starts with a capital letter."""
    return i + 1 == len(words) or words[i + 1].is_capitalized


def next_core(words: Sequence[Word], i: int) -> str:
    """The core of the word after word i ("" at the end)."""
    return words[i + 1].core if i + 1 < len(words) else ""
