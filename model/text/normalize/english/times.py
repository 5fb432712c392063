"""English times of day: "3:30pm" → "three thirty p-m", "15:45" → "fifteen forty-five", "9 am"
→ "nine a-m", "3:00" → "three o'clock", "3:05" → "three oh five". a.m. and p.m. are written
with a hyphen: espeak-ng reads a lone "a" as the article."""
from __future__ import annotations

import re
from typing import Sequence

from model.text.normalize.english.numbers import cardinal
from model.text.normalize.rules import Reading, Word, ends_sentence

_MERIDIEM = r"([ap]\.?m\.?)"
_CLOCK = re.compile(f"([0-9]{{1,2}}):([0-9]{{2}}){_MERIDIEM}?", re.IGNORECASE)
_HOUR = re.compile(f"([0-9]{{1,2}}){_MERIDIEM}", re.IGNORECASE)
_MERIDIEM_WORD = re.compile(_MERIDIEM, re.IGNORECASE)
_BARE_HOUR = re.compile(r"[0-9]{1,2}")


def _clock(hour: int, minute: int, twelve_hour: bool) -> str | None:
    if hour > (12 if twelve_hour else 24) or minute > 59:
        return None
    if minute:
        return f"{cardinal(hour)} {'oh ' if minute < 10 else ''}{cardinal(minute)}"
    if twelve_hour:
        return cardinal(hour)
    return f"{cardinal(hour)} " + ("hundred" if hour > 12 else "o'clock")


def _say(words: Sequence[Word], i: int, said: str, meridiem: str) -> str:
    """Word i as `said` followed by the meridiem as written there ("" for none); a dotted one
    ("p.m.") loses its own period unless it ends the sentence."""
    if not meridiem:
        return words[i].say(said)
    said = f"{said} {meridiem[0].lower()}-m".lstrip()
    if "." in meridiem:
        return words[i].say_abbreviation(said, ends_sentence(words, i))
    return words[i].say(said)


def read_time(words: Sequence[Word], i: int) -> Reading | None:
    word = words[i]
    following = ""  # a meridiem written as the next word ("9 am")
    if i + 1 < len(words) and not word.trail and _MERIDIEM_WORD.fullmatch(words[i + 1].core):
        following = words[i + 1].core
    if match := _CLOCK.fullmatch(word.core):
        hour, minute, attached = int(match[1]), int(match[2]), match[3] or ""
    elif match := _HOUR.fullmatch(word.core):
        hour, minute, attached = int(match[1]), 0, match[2]
    elif _BARE_HOUR.fullmatch(word.core) and following:
        hour, minute, attached = int(word.core), 0, ""
    else:
        return None
    said = _clock(hour, minute, bool(attached or following))
    if said is None:
        return None
    if attached or not following:
        return Reading.each(_say(words, i, said, attached))
    return Reading.each(word.say(said), _say(words, i + 1, "", following))
