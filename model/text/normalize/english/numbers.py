"""English numbers: how a number is said (the words other rules build on), and the rule for
numbers on their own: cardinals (thousands separators), decimals, negatives, ordinals, proper
fractions, years and decades, two numbers joined by a slash ("24/7")."""
from __future__ import annotations

import re
from typing import Sequence

from num2words import num2words

from model.text.normalize.rules import Reading, Word

# A number as written: optional minus sign, digits (thousands separated by commas or not), an
# optional decimal part. ASCII digits only: other scripts' digits are other languages' business.
UNSIGNED = r"(?:[0-9]{1,3}(?:,[0-9]{3})+|[0-9]+)(?:\.[0-9]+)?"
NUMBER = f"[-−]?{UNSIGNED}"
_NUMBER = re.compile(f"({NUMBER})")
_ORDINAL = re.compile(r"([0-9]+)(?:st|nd|rd|th)")
_DECADE = re.compile(r"((?:1[0-9]|20)?[0-9]0)'?s")
_SLASHED = re.compile(r"([0-9]{1,3})/([0-9]{1,3})")
# A four-digit number that may be a year (other rules decide whether it is one where it stands).
YEAR = r"1[0-9]{3}|20[0-9]{2}"
_YEAR = re.compile(YEAR)
# What every number this rule reads begins with (a sign or a digit).
_NUMERIC_START = frozenset("0123456789-−")
_DIGIT_NAMES = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
# num2words raises beyond ~10^27; past a trillion trillion nobody says the number anyway.
LONGEST_SAID = 15
# Words after which a four-digit number is a year ("in 1999"), not a count ("1999 people").
_YEAR_CUES = frozenset("in since of by from until till to year before after around circa during early late mid".split())
_FRACTION_NAMES = {2: ("half", "halves"), 4: ("quarter", "quarters")}


def _plain(words: str) -> str:
    # num2words writes British "and" after hundreds and commas between groups; the comma would
    # be a pause, and American speech has neither.
    return words.replace(",", "").replace(" and ", " ")


def digits(text: str) -> str:
    """Each digit of `text` by name ("305" → "three zero five"); other characters are dropped."""
    return " ".join(_DIGIT_NAMES[int(c)] for c in text if "0" <= c <= "9")


def cardinal(n: int) -> str:
    if len(str(abs(n))) > LONGEST_SAID:
        return ("minus " if n < 0 else "") + digits(str(n))
    return _plain(num2words(n))


def ordinal(n: int) -> str:
    return digits(str(n)) if len(str(n)) > LONGEST_SAID else _plain(num2words(n, to="ordinal"))


def year(n: int) -> str:
    """1999 → "nineteen ninety-nine", 2026 → "twenty twenty-six", 2005 → "two thousand five"."""
    return _plain(num2words(n, to="year"))


def number(text: str) -> str | None:
    """A number as written (NUMBER) said as a quantity: "-1,234.50" → "minus one thousand two
    hundred thirty-four point five zero"; None for anything else."""
    if not _NUMBER.fullmatch(text):
        return None
    negative = text[0] in "-−"
    whole, _, decimals = text.lstrip("-−").replace(",", "").partition(".")
    said = cardinal(int(whole)) + (f" point {digits(decimals)}" if decimals else "")
    return f"minus {said}" if negative else said


def is_one(text: str) -> bool:
    """Whether a written number is exactly one (what takes a singular noun)."""
    return text.lstrip("-−") == "1"


def _fraction(numerator: int, denominator: int) -> str:
    singular, plural = _FRACTION_NAMES.get(denominator) or (ordinal(denominator), ordinal(denominator) + "s")
    return f"{cardinal(numerator)} {singular if numerator == 1 else plural}"


def _plural(said: str) -> str:
    """A decade's name from its first year's: "nineteen ninety" → "nineteen nineties"."""
    return said[:-1] + "ies" if said.endswith("y") else said + "s"


def read_number(words: Sequence[Word], i: int) -> Reading | None:
    word = words[i]
    core = word.core
    if core[:1] not in _NUMERIC_START:  # a word: declined without trying each form of a number
        return None
    if match := _ORDINAL.fullmatch(core):
        return Reading.each(word.say(ordinal(int(match[1]))))
    if match := _DECADE.fullmatch(core):
        first = int(match[1])
        said = year(first) if first >= 1000 else cardinal(first)
        return Reading.each(word.lead.rstrip("'‘’") + _plural(said) + word.trail)
    if match := _SLASHED.fullmatch(core):
        numerator, denominator = int(match[1]), int(match[2])
        if 0 < numerator < denominator <= 10:
            return Reading.each(word.say(_fraction(numerator, denominator)))
        return Reading.each(word.say(f"{cardinal(numerator)} {cardinal(denominator)}"))
    if _YEAR.fullmatch(core) and _year_in_context(words, i):
        return Reading.each(word.say(year(int(core))))
    said = number(core)
    return None if said is None else Reading.each(word.say(said))


def _year_in_context(words: Sequence[Word], i: int) -> bool:
    """A four-digit number is a year after a cue word, or when a clause or the text ends with it."""
    after_cue = i > 0 and words[i - 1].core.lower() in _YEAR_CUES
    return after_cue or bool(words[i].trail) or i + 1 == len(words)
