"""English numbers said digit by digit, as people read identifiers: phone numbers (groups with a
pause between them: "five five five, one two three, four five six seven"), numbers after "#" or
"No." ("order #12345" → "order number one two three four five"), and ZIP codes (after a state's
code, spelled, or a cue word: "IL 62704" → "I-L six two seven zero four")."""
from __future__ import annotations

import re
from typing import Sequence

from model.text.normalize.english.letters import spell
from model.text.normalize.english.numbers import cardinal, digits
from model.text.normalize.rules import Reading, Word

# With an area code the groups share one separator; a local number alone takes a hyphen (a dot
# would make it a decimal).
_PHONE = re.compile(r"(?:\+?[0-9]{1,3}[-.])?[0-9]{3}([-.])[0-9]{3}\1[0-9]{4}")
_AREA_CODE = re.compile(r"\(([0-9]{3})\)")
_LOCAL = re.compile(r"[0-9]{3}-[0-9]{4}")
_NUMBERED = re.compile(r"#([0-9]+)")
_ZIP = re.compile(r"[0-9]{5}(?:-[0-9]{4})?")
_ZIP_CUES = frozenset(("zip", "zipcode", "postcode", "code"))
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
    if _PHONE.fullmatch(word.core) or _LOCAL.fullmatch(word.core):
        return Reading.each(word.say(grouped_digits(word.core)))
    if (area := _AREA_CODE.fullmatch(word.text)) and following and _LOCAL.fullmatch(following.core):
        return Reading.each(digits(area[1]) + ",", following.say(grouped_digits(following.core)))
    if match := _NUMBERED.fullmatch(word.core):
        return Reading.each(word.say(f"number {_identifier(match[1])}"))
    if word.core.lower() == "no" and word.trail.startswith(".") and following and following.core.isascii() \
            and following.core.isdigit():
        return Reading.each(word.say_abbreviation("number", False), following.say(_identifier(following.core)))
    if word.core in US_STATES and following and _ZIP.fullmatch(following.core):
        return Reading.each(word.say(spell(word.core)), following.say(grouped_digits(following.core)))
    if _ZIP.fullmatch(word.core) and i > 0 and words[i - 1].core.lower() in _ZIP_CUES:
        return Reading.each(word.say(grouped_digits(word.core)))
    return None
