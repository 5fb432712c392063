"""What one speech may say, counted after every expansion, before any of it is prepared.

The input limit (4,096 characters) bounds what a client writes, not what the server speaks:
SSML's `say-as`, the pronunciations in force (a request's and the server's lexicon) and text
normalization all turn short text into longer speech ("a " × 2,000 with a 300-character
respelling of "a" is 600,000 characters; a 1,001-digit cardinal, 5,000). One budget, the same on
every route and for each speak-socket turn, is counted on the text as it will be spoken:

- *spoken characters*: the parts' text after `say-as` and pronunciations (phoneme runs count
  their symbols), read through the English normalizer as a front end would read it;
- *spoken seconds*: those characters at SECONDS_PER_CHAR (an ideograph or kana, a syllable of
  its own, at SECONDS_PER_IDEOGRAPH), at the request's speed, plus SSML's pauses.

A speech over either is refused (SpeechTooLong, a 400 naming the budget) before any preparation.
Counting is linear in the text: text longer than the character budget is refused without being
normalized, so the count costs at most one normalization of `max_chars` characters (~10 ms).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

from api.speech.text_split import IDEOGRAPH, UnspeakableText
from model.text import normalize
from model.text.ssml import SpeechPart

# Conversational English (joe: 0.06-0.08 s a character over the evaluation sentences).
SECONDS_PER_CHAR = 0.07
# Mandarin runs at 4-5 syllables a second, one ideograph each; Japanese kana a little faster.
SECONDS_PER_IDEOGRAPH = 0.2


class SpeechTooLong(UnspeakableText):
    """A speech (or a speak-socket turn) that would say more than the budget allows; the message
    names the budget, what the text came to, and the flag that sets it."""


@dataclass(frozen=True, slots=True)
class Spoken:
    """What a text says: `chars` spoken characters, `seconds` of speech (both ≥ 0)."""

    chars: int = 0
    seconds: float = 0.0

    def __add__(self, other: Spoken) -> Spoken:
        return Spoken(self.chars + other.chars, self.seconds + other.seconds)


@dataclass(frozen=True, slots=True)
class SpokenBudget:
    """The most one speech may say. Invariant: `max_chars` ≥ 1 and `max_seconds` > 0; `check`
    returns what the text says exactly when that is within both, and raises SpeechTooLong
    otherwise, having normalized at most `max_chars` characters."""

    max_chars: int
    max_seconds: float

    def __post_init__(self) -> None:
        if self.max_chars < 1 or not self.max_seconds > 0:
            raise ValueError("the spoken budget needs max_chars >= 1 and max_seconds > 0")

    def check(self, parts: Sequence[SpeechPart], speed: float = 1.0, before: Spoken = Spoken()) -> Spoken:
        """What `parts`, said at `speed` after `before` (the turn so far on a socket), come to
        with `before`; SpeechTooLong when that is over the budget."""
        written = before.chars + sum(len(part.text) for part in parts)
        if written > self.max_chars:  # normalization keeps or lengthens text: no need to read it
            self._refuse(f"at least {written:,} characters")
        spoken = before + sum((spoken_by(part.text, speed * part.rate) for part in parts), Spoken())
        spoken += Spoken(0, sum(part.pause_after for part in parts))
        if spoken.chars > self.max_chars:
            self._refuse(f"{spoken.chars:,} characters")
        if spoken.seconds > self.max_seconds:
            self._refuse(f"about {spoken.seconds:,.0f} seconds of speech")
        return spoken

    def check_texts(self, texts: Iterable[str], speed: float = 1.0, before: Spoken = Spoken()) -> Spoken:
        """`check` for plain texts (no pauses, the request's rate)."""
        return self.check([SpeechPart(text) for text in texts], speed, before)

    def _refuse(self, amount: str) -> None:
        raise SpeechTooLong(
            f"the input says {amount} once SSML, pronunciations and numbers are read out; one request (or one "
            f"speak-socket turn) may say at most {self.max_chars:,} characters and {self.max_seconds:g} seconds "
            "(--max-spoken-chars, --max-speech-seconds): send it in parts")


def spoken_by(text: str, speed: float = 1.0) -> Spoken:
    """What `text` says at `speed` (a part's rate times the request's), read as a front end
    reads it."""
    said = normalize(text).text if text else ""
    ideographs = len(IDEOGRAPH.findall(said))
    others = len(said) - ideographs
    return Spoken(len(said), (others * SECONDS_PER_CHAR + ideographs * SECONDS_PER_IDEOGRAPH) / speed)
