"""English numbers said digit by digit, as people read identifiers (phone numbers have a rule of
their own, phones.py): numbers after "#" or "No." ("order #12345" → "order number one two three
four five"), ZIP codes after a state's code ("IL 62704" → "I-L six two seven zero four"), ZIP+4
codes anywhere ("94103-1234" → "nine four one zero three, one two three four": nothing else is
written so), and identifiers of three digits or more after a cue word ("your order number is
58213", "ZIP code still 90210")."""
from __future__ import annotations

import re
from typing import Sequence

from model.text.normalize.english.letters import spell
from model.text.normalize.english.numbers import cardinal, digits
from model.text.normalize.rules import Reading, Word

_NUMBERED = re.compile(r"#([0-9]+)")
_ZIP = re.compile(r"[0-9]{5}(?:-[0-9]{4})?")
_ZIP_PLUS_FOUR = re.compile(r"[0-9]{5}-[0-9]{4}")
# Words after which a number names something ("your order number is 58213", "ZIP code still
# 90210"): it is read digit by digit, as people read identifiers; "is", "was"... may come between.
_IDENTIFIER_CUES = frozenset(("number", "zip", "zipcode", "postcode", "code", "account", "confirmation",
                              "reference", "tracking", "ticket", "pin", "id", "serial"))
_LINKING = frozenset(("is", "was", "still", "remains", "reads", "of"))
# An identifier this short after a cue is read as a number still ("number 7", "code 42").
_SHORTEST_IDENTIFIER = 3
US_STATES = frozenset(
    "AL AK AZ AR CA CO CT DE DC FL GA HI ID IL IN IA KS KY LA ME MD MA MI MN MS MO MT NE NV NH NJ "
    "NM NY NC ND OH OK OR PA RI SC SD TN TX UT VT VA WA WV WI WY".split())
# Numbers this short are said as numbers ("No. 10" → "number ten"), longer ones digit by digit.
_LONGEST_CARDINAL = 2


def grouped_digits(text: str) -> str:
    """Digit groups separated by - . or spaces, each digit by name, a pause (comma) between
    groups; a leading + is "plus"."""
    groups = [digits(group) for group in re.split(r"[-. ]", text.lstrip("+")) if group]
    return ("plus " if text.startswith("+") else "") + ", ".join(groups)


def _identifier(text: str) -> str:
    return cardinal(int(text)) if len(text) <= _LONGEST_CARDINAL else digits(text)


def read_digits(words: Sequence[Word], i: int) -> Reading | None:
    word = words[i]
    following = words[i + 1] if i + 1 < len(words) else None
    if _ZIP_PLUS_FOUR.fullmatch(word.core):
        return Reading.each(word.say(grouped_digits(word.core)))
    if match := _NUMBERED.fullmatch(word.core):
        return Reading.each(word.say(f"number {_identifier(match[1])}"))
    if word.core.lower() == "no" and word.trail.startswith(".") and following and following.core.isascii() \
            and following.core.isdigit():
        return Reading.each(word.say_abbreviation("number", False), following.say(_identifier(following.core)))
    if word.core in US_STATES and following and _ZIP.fullmatch(following.core):
        return Reading.each(word.say(spell(word.core)), following.say(grouped_digits(following.core)))
    if _ZIP.fullmatch(word.core) or (word.core.isascii() and word.core.isdigit()
                                     and len(word.core) >= _SHORTEST_IDENTIFIER):
        if _follows_identifier_cue(words, i):
            return Reading.each(word.say(grouped_digits(word.core)))
    return None


def _follows_identifier_cue(words: Sequence[Word], i: int) -> bool:
    """Whether word i comes right after an identifier's cue word, or after one and a linking
    word ("number is"), with no punctuation ending the cue."""
    before = [w for w in words[max(0, i - 2):i]]
    if before and before[-1].core.lower() in _IDENTIFIER_CUES and not before[-1].trail:
        return True
    return (len(before) == 2 and before[-1].core.lower() in _LINKING and not before[-1].trail
            and before[0].core.lower() in _IDENTIFIER_CUES and not before[0].trail)
