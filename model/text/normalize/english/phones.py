"""English phone numbers, said digit by digit in their groups with a pause (a comma) between
groups, as people say them: "555-123-4567" → "five five five, one two three, four five six
seven", also "(555) 123-4567" and a local "555-1234"; with a country code, attached or written
apart: "+1-555-123-4567", "1 (800) 555-1234", "+1 415 555 0100", "+44 20 7946 0958" ("plus four
four, two zero, ..."). A North American area code of the N00 kind (800, 900: toll-free and
premium numbers) is said as hundreds ("1-800-555-1234" → "one, eight hundred, five five five, one
two three four"), as everybody says it; the other toll-free codes (888, 877...) are said digit by
digit, as they mostly are."""
from __future__ import annotations

import re
from typing import Sequence

from model.text.normalize.english.numbers import cardinal, digits
from model.text.normalize.rules import Reading, Word

# With an area code the groups share one separator; a local number alone takes a hyphen (a dot
# would make it a decimal). So three digits and four are a phone number, never a range ("500-2000").
_PHONE = re.compile(r"(?:(\+?[0-9]{1,3})[-.])?([0-9]{3})([-.])([0-9]{3})\3([0-9]{4})")
_LOCAL = re.compile(r"([0-9]{3})-([0-9]{4})")
_AREA_CODE = re.compile(r"\(([0-9]{3})\)")
_COUNTRY_CODE = re.compile(r"\+[0-9]{1,3}")
# A group has two digits or more, but the first after a country code may have one ("+33 1 23 45
# 67 89"): a number after the phone number ("... 0958 3 times") is not a group of it.
_FIRST_GROUP = re.compile(r"[0-9]{1,4}")
_GROUP = re.compile(r"[0-9]{2,4}")
# What a phone number's core begins with ("(800)" has the core "800").
_OPENERS = frozenset("+0123456789")
_NORTH_AMERICAN = [3, 3, 4]  # the group lengths of a number after +1
_SERVICE_CODE = re.compile(r"[2-9]00")
# A number outside North America has at most 15 digits with its country code (ITU E.164); bare
# groups after a "+" are taken up to this many, so that a count after the number stays a count.
_LONGEST_NATIONAL = 12


def _said(country: str, groups: Sequence[str]) -> list[str]:
    """The country code ("" for none) and each digit group, as said."""
    said = [digits(group) for group in groups]
    if country.lstrip("+") in ("", "1") and [len(g) for g in groups] == _NORTH_AMERICAN \
            and _SERVICE_CODE.fullmatch(groups[0]):
        said[0] = cardinal(int(groups[0]))
    if country:
        said.insert(0, ("plus " if country.startswith("+") else "") + digits(country))
    return said


def _bare_groups(words: Sequence[Word], k: int, country: str) -> list[tuple[str, ...]]:
    """The digit groups written one a word from word k on, after `country` ("+1 415 555 0100"),
    each a 1-tuple; [] when they do not make a number."""
    groups: list[str] = []
    for word in words[k:]:
        group = _GROUP if groups else _FIRST_GROUP
        if word.lead or not group.fullmatch(word.core) or len("".join(groups) + word.core) > _LONGEST_NATIONAL:
            break
        groups.append(word.core)
        if word.trail:  # punctuation ends the number
            break
    if country == "+1":
        groups = groups[:3] if [len(group) for group in groups[:3]] == _NORTH_AMERICAN else []
    elif len(groups) < 2 or len("".join(groups)) < 6:
        groups = []
    return [(group,) for group in groups]


def _written_apart(words: Sequence[Word], i: int) -> tuple[str, list[tuple[str, ...]]] | None:
    """A phone number written over the words from i on: its country code ("" for none) and the
    digit groups of each word after that code's; None when none starts there. Punctuation after a
    word but the last ends the number."""
    word = words[i]
    following = words[i + 1] if i + 1 < len(words) else None
    country = ""
    if following is not None and not word.trail and (
            _COUNTRY_CODE.fullmatch(word.core) or (word.core == "1" and _AREA_CODE.fullmatch(following.text))):
        country = word.core
    start = i + 1 if country else i
    if start + 1 < len(words) and (area := _AREA_CODE.fullmatch(words[start].text)) \
            and (local := _LOCAL.fullmatch(words[start + 1].core)):
        return country, [(area[1],), local.groups()]
    if not country.startswith("+"):
        return None
    if start < len(words) and (match := _PHONE.fullmatch(words[start].core)) and not match[1]:
        return country, [(match[2], match[4], match[5])]
    groups = _bare_groups(words, start, country)
    return (country, groups) if groups else None


def read_phone(words: Sequence[Word], i: int) -> Reading | None:
    word = words[i]
    if word.core[:1] not in _OPENERS:  # most words: cheaply declined
        return None
    if match := _PHONE.fullmatch(word.core):
        return Reading.each(word.say(", ".join(_said(match[1] or "", (match[2], match[4], match[5])))))
    if match := _LOCAL.fullmatch(word.core):
        return Reading.each(word.say(", ".join(_said("", match.groups()))))
    apart = _written_apart(words, i)
    if apart is None:
        return None
    country, groups = apart
    said = iter(_said(country, [group for written in groups for group in written]))
    each_word = ([(country,)] if country else []) + groups
    spoken = []
    for k, written in enumerate(each_word):
        words_said = ", ".join(next(said) for _ in written)
        if _AREA_CODE.fullmatch(words[i + k].text):
            # Its parentheses go; the comma after it is the pause they marked.
            spoken.append(words_said + ",")
        else:
            spoken.append(words[i + k].say(words_said + ("," if k + 1 < len(each_word) else "")))
    return Reading.each(*spoken)
