"""English codes of letters and digits, said a group of letters or digits at a time: "XK7Q2" →
"X-K seven Q two", "A12B" → "A- one two B", "B2B" → "B two B", "MP3" → "M-P three", "4K" → "four
K"; hyphenated ones too: "COVID-19" → "COVID nineteen", "R2-D2" → "R two D two", "F-16" → "F
sixteen".

Letters are spelled (letters.spell) in runs of one or two, and longer runs when they are an
acronym; a longer run that is not is said as written ("COVID"). Digits are said one by one, as
people read codes ("A12B", "H264", "720p"), except one or two of them in a code that is only a
name and its number ("Q3", "G20", "x86", "10K") or after a hyphen ("COVID-19", "F-16"), which are
numbers; after a hyphen a year is a year ("Q3-2024").

Capitals and digits mix freely; a lowercase letter counts only alone ("x86", "v1", "401k"), so a
word with a number stuck to it stays as written ("5mins", "iPhone15"), and so does a plural
("MP3s"). A hyphenated code begins with letters, a word among them ("Covid-19", "pre-2020"): one
that begins with a number is a range or a compound ("3-1", "10-year-old"). The rules before this
one read what looks like a code but is not: ordinals, decades, units, times ("2nd", "1990s",
"10km", "5pm")."""
from __future__ import annotations

import re
from typing import Sequence

from model.text.normalize.english.letters import is_acronym, spell
from model.text.normalize.english.numbers import YEAR, cardinal, digits, year
from model.text.normalize.rules import Reading, Word

_DIGIT = re.compile(r"[0-9]")
# Capitals and digits, and lowercase letters with no letter beside them.
_CODE = re.compile(r"(?:[A-Z0-9]|(?<![A-Za-z])[a-z](?![A-Za-z]))+")
_RUNS = re.compile(r"[0-9]+|[A-Za-z]+")
_DIGITS = re.compile(r"[0-9]+")
_CAPITALS = re.compile(r"[A-Z]+")
_WORD = re.compile(r"[A-Za-z]+")
_PLURAL = re.compile(r".*[0-9]s")
_YEAR = re.compile(YEAR)
# Digit runs this long may be a number; longer ones are read digit by digit.
_LONGEST_NUMBER = 2


def _letters(run: str) -> str:
    return spell(run) if len(run) <= 2 or is_acronym(run) else run


def _number(run: str) -> str:
    """A digit run as a number when it is short and has no leading zero ("A01" is "A zero one")."""
    if len(run) <= _LONGEST_NUMBER and (run[0] != "0" or len(run) == 1):
        return cardinal(int(run))
    return digits(run)


def say_code(code: str) -> str:
    """A code of capitals, digits and lone lowercase letters, run by run."""
    runs = _RUNS.findall(code)
    # A name and its number ("Q3", "10K") say it as a number; a longer code, digit by digit.
    say_digits = _number if len(runs) == 2 else digits
    return " ".join(say_digits(run) if run[0].isdigit() else _letters(run) for run in runs)


def _is_code(text: str) -> bool:
    return bool(_CODE.fullmatch(text)) and not text.isdigit() and not _PLURAL.fullmatch(text)


def _say_part(part: str, first: bool) -> str | None:
    """One part of a hyphenated code as said; None when it cannot be one."""
    if _DIGITS.fullmatch(part):
        if first:
            return None  # a range or a compound: "3-1", "10-year-old"
        return year(int(part)) if _YEAR.fullmatch(part) else _number(part)
    if _CAPITALS.fullmatch(part):
        return _letters(part)
    if _DIGIT.search(part):
        return say_code(part) if _is_code(part) else None
    return part if first and _WORD.fullmatch(part) else None


def read_code(words: Sequence[Word], i: int) -> Reading | None:
    word = words[i]
    core = word.core
    if not _DIGIT.search(core):
        return None
    if "-" not in core:
        return Reading.each(word.say(say_code(core))) if _is_code(core) else None
    said = [_say_part(part, k == 0) for k, part in enumerate(core.split("-"))]
    return None if None in said else Reading.each(word.say(" ".join(said)))
