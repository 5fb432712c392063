"""English abbreviations with a period: titles and other words that come before what they name
("Dr." → "Doctor", "vs." → "versus", "e.g." → "for example": their period never ends a sentence),
and words that close a name or a list ("Inc." → "Incorporated", "etc." → "et cetera": their
period ends the sentence too when the text ends there or a capital follows). "St." is "Saint"
before a name and "Street" after one ("St. Louis", "Elm St.")."""
from __future__ import annotations

from typing import Sequence

from model.text.normalize.rules import Reading, Word, ends_sentence

# Written without their period → said; these precede what they qualify.
BEFORE = {
    "Dr": "Doctor", "Mr": "Mister", "Mrs": "Missus", "Ms": "Miz", "Prof": "Professor", "Mt": "Mount",
    "Gen": "General", "Capt": "Captain", "Sgt": "Sergeant", "Rev": "Reverend", "Hon": "Honorable",
    "vs": "versus", "e.g": "for example", "i.e": "that is", "approx": "approximately",
}
# These follow what they qualify, so a sentence may end with them.
AFTER = {
    "Jr": "Junior", "Sr": "Senior", "Inc": "Incorporated", "Ltd": "Limited", "Corp": "Corporation",
    "Co": "Company", "etc": "et cetera", "Ave": "Avenue", "Blvd": "Boulevard", "Rd": "Road",
    "Ln": "Lane", "Dept": "Department",
}
# As written, period included: what the text splitter must not take for a sentence end. "No."
# is read by digits.py ("No. 5"); months by dates.py.
NOT_SENTENCE_ENDS = frozenset(f"{written}." for written in (*BEFORE, *AFTER, "St", "No"))


def _saint_or_street(words: Sequence[Word], i: int) -> str:
    previous = words[i - 1] if i > 0 else None
    after_name = previous is not None and not previous.trail and previous.core[:1].isalnum() \
        and (previous.is_capitalized or previous.core[:1].isdigit())
    following = words[i + 1] if i + 1 < len(words) else None
    return "Saint" if not after_name and following is not None and following.is_capitalized else "Street"


def read_abbreviation(words: Sequence[Word], i: int) -> Reading | None:
    word = words[i]
    if not word.trail.startswith("."):
        return None
    if word.core in BEFORE:
        return Reading.each(word.say_abbreviation(BEFORE[word.core], False))
    if word.core in AFTER:
        return Reading.each(word.say_abbreviation(AFTER[word.core], ends_sentence(words, i)))
    if word.core == "St":
        said = _saint_or_street(words, i)
        return Reading.each(word.say_abbreviation(said, said == "Street" and ends_sentence(words, i)))
    return None
