"""English dates: ISO (2026-12-03) and US (12/03/2026, 12-03-2026) numeric dates, "Dec 3rd[,
2026]" and "3 December [2026]", all said the way people say them ("December third, twenty
twenty-six", "the third of December twenty twenty-six"). A day/month order is used when the first
number cannot be a month (25/12/2026)."""
from __future__ import annotations

import re
from typing import Sequence

from model.text.normalize.english.numbers import ordinal, year
from model.text.normalize.rules import Reading, Word, ends_sentence

MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December")
# A month's name by how it may be written: in full, or abbreviated (with or without a period).
_MONTH_NAMES = {name.lower(): name for name in MONTHS} | {
    name[:3].lower(): name for name in MONTHS if name != "May"} | {"sept": "September"}
_ISO = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})")
_SLASHED = re.compile(r"([0-9]{1,2})([/-])([0-9]{1,2})\2([0-9]{4})")
_DAY = re.compile(r"([0-9]{1,2})(?:st|nd|rd|th)?")
_YEAR = re.compile(r"[0-9]{4}")


def _date(month: int, day: int, year_number: int) -> str | None:
    if not (1 <= month <= 12 and 1 <= day <= 31):
        return None
    return f"{MONTHS[month - 1]} {ordinal(day)}, {year(year_number)}"


def _month(word: Word) -> str | None:
    """The month a word names, when it is capitalized (so "may" and "march" stay verbs)."""
    return _MONTH_NAMES.get(word.core.lower()) if word.is_capitalized else None


def _say_month(words: Sequence[Word], k: int, month: str) -> str:
    """Word k, which names `month`, said in full; an abbreviation's own period goes unless it
    ends the sentence."""
    if words[k].core.lower() == month.lower():
        return words[k].say(month)
    return words[k].say_abbreviation(month, ends_sentence(words, k))


def _day(word: Word) -> int | None:
    match = _DAY.fullmatch(word.core)
    return int(match[1]) if match and 1 <= int(match[1]) <= 31 else None


def _with_year(words: Sequence[Word], after: int, said: list[str]) -> Reading:
    """`said` for the words up to `after`, and the year after them when there is one."""
    following = after + 1
    if following < len(words) and _YEAR.fullmatch(words[following].core):
        said.append(words[following].say(year(int(words[following].core))))
    return Reading.each(*said)


def read_date(words: Sequence[Word], i: int) -> Reading | None:
    word = words[i]
    if match := _ISO.fullmatch(word.core):
        said = _date(int(match[2]), int(match[3]), int(match[1]))
        return None if said is None else Reading.each(word.say(said))
    if match := _SLASHED.fullmatch(word.core):
        first, second, year_number = int(match[1]), int(match[3]), int(match[4])
        said = _date(first, second, year_number) if first <= 12 else _date(second, first, year_number)
        return None if said is None else Reading.each(word.say(said))
    following = words[i + 1] if i + 1 < len(words) else None
    if following is None:
        return None
    # The month first: most words are none, and that is cheaper to see than a day.
    if (month := _month(word)) and (day := _day(following)) and not word.trail.strip("."):
        # "Dec 3rd", "December 3, 2026"
        return _with_year(words, i + 1, [_say_month(words, i, month), following.say(ordinal(day))])
    if (month := _month(following)) and (day := _day(word)) and not word.trail:  # "3 December 2026"
        return _with_year(words, i + 1, [word.say(f"the {ordinal(day)} of"), _say_month(words, i + 1, month)])
    return None
