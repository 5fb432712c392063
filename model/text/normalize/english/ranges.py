"""English ranges and scores: two numbers joined by a hyphen or an en dash, said with "to" between
them ("pages 10-20" → "pages ten to twenty", "won 3-1" → "won three to one", "5–7 days"); a unit
after them, attached or not, said once and in the plural ("10-20%" → "ten to twenty percent",
"5-10 km" → "five to ten kilometers"); a span of years as years ("1990-1995" and "1990-95" →
"nineteen ninety to nineteen ninety-five").

Phone numbers ("555-1234"), ZIP+4 codes ("94103-1234") and numeric dates have the same shape and
are read before this (phones.py, digits.py, dates.py). A year followed by a number that cannot end a
span of years ("2026-12": a year and its month) is left as written; a leading minus ("-5-10") is not
a range either."""
from __future__ import annotations

import re
from typing import Sequence

from model.text.normalize.english.numbers import UNSIGNED, YEAR, number, year
from model.text.normalize.english.units import UNIT, UNITS
from model.text.normalize.rules import Reading, Word

_RANGE = re.compile(f"({UNSIGNED})[-–]({UNSIGNED})({UNIT})?")
_YEAR = re.compile(YEAR)
_SHORT_YEAR = re.compile(r"[0-9]{2}")


def _range(first: str, second: str) -> str | None:
    """The two numbers with "to" between them; after a year, a later year as a year, written in
    full or by its last two digits ("1990-95"); None after a year for a smaller number ("2026-12")."""
    said = f"{number(first)} to {number(second)}"
    if not _YEAR.fullmatch(first):
        return said
    start = int(first)
    if _SHORT_YEAR.fullmatch(second):
        end = start // 100 * 100 + int(second)
    elif _YEAR.fullmatch(second):
        end = int(second)
    else:  # "1000-10000 people"
        return said if float(second.replace(",", "")) > start else None
    return f"{year(start)} to {year(end)}" if end > start else None


def read_range(words: Sequence[Word], i: int) -> Reading | None:
    word = words[i]
    match = _RANGE.fullmatch(word.core)
    if not match:
        return None
    first, second, unit = match.groups()
    said = _range(first, second)
    if said is None:
        return None
    if unit:
        return Reading.each(word.say(f"{said} {UNITS[unit][1]}"))
    following = words[i + 1] if i + 1 < len(words) else None
    if following is not None and not word.trail and following.core in UNITS:
        return Reading.each(word.say(said), following.say(UNITS[following.core][1]))
    return Reading.each(word.say(said))
