"""Roman numerals English says: after a name as an ordinal ("Henry VIII" → "Henry the Eighth"),
after a word that counts parts as a cardinal ("World War II" → "World War two"), and before
"century" ("XXI century" → "twenty-first century").

Only numerals of two or more letters from I, V and X are read after a name: single letters
("Malcolm X", "Model X") and numerals with L, C, D or M ("Washington DC") are more often
letters."""
from __future__ import annotations

import re
from typing import Sequence

from model.text.normalize.english.numbers import cardinal, ordinal
from model.text.normalize.rules import Reading, Word

_VALUES = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100}
# Well-formed numerals up to 399 (a century or a regnal number needs no more).
_NUMERAL = re.compile(r"C{0,3}(?:XC|XL|L?X{0,3})(?:IX|IV|V?I{0,3})")
_AFTER_NAME = re.compile(r"[IVX]{2,}")
_NAME = re.compile(r"[A-Z][a-z]+")
# Words after which a numeral counts ("Part II" → "Part two") rather than names a monarch.
_COUNTING = frozenset("War Part Chapter Volume Vol Book Act Scene Episode Phase Level Stage Type Class Mark "
                      "Gen Generation Season Bowl Apollo Title Article Section Round".split())


def value(numeral: str) -> int | None:
    """The numeral's value, or None when it is not a well-formed numeral."""
    if not numeral or not _NUMERAL.fullmatch(numeral):
        return None
    total = 0
    for letter, after in zip(numeral, [*numeral[1:], ""]):
        worth = _VALUES[letter]
        total += -worth if after and _VALUES[after] > worth else worth
    return total


def read_roman(words: Sequence[Word], i: int) -> Reading | None:
    word = words[i]
    number = value(word.core)
    if number is None:
        return None
    if i + 1 < len(words) and not word.trail and words[i + 1].core.lower() in ("century", "centuries"):
        return Reading.each(word.say(ordinal(number)))
    previous = words[i - 1] if i > 0 else None
    if not _AFTER_NAME.fullmatch(word.core) or previous is None or previous.trail or not _NAME.fullmatch(previous.core):
        return None
    if previous.core in _COUNTING:
        return Reading.each(word.say(cardinal(number)))
    return Reading.each(word.say("the " + ordinal(number).title()))
