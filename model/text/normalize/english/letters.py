"""English words in capitals: acronyms said letter by letter ("FBI" → "F-B-I", "ATMs" →
"A-T-Ms") or as words (NASA, and capitals written for emphasis: "CALL NOW").

Capitals written spelled already ("A-B-C", "U-S-A") are spelled the same way.

The rule: a token of 2-5 capital letters (a plural "s" allowed) is spelled unless it is in
READ_AS_WORDS or has the shape of English syllables: an onset a word can begin with (one
consonant or a common cluster), then vowels, with at most two consonants between vowel groups
and at the end (NASA, STOP, FREE, NO). So "FBI" (no word begins "fb"), "HTML" (no vowel), "USA"
and "IBM" (a vowel first: those are nearly all acronyms) are spelled. Letters are joined by
hyphens: espeak-ng reads a lone "A" as the article ("A T M" → "uh tee em").
"""
from __future__ import annotations

import re
from typing import Sequence

from model.text.normalize.rules import Reading, Word

# Said as words though the shape rule would spell them: acronyms and common words in capitals.
READ_AS_WORDS = frozenset(
    "AIDS OPEC ICANN JPEG IKEA UNICEF ASAP "  # acronyms said as words
    "AN AS AT IF IN IS ON OR UP OF OK ALL AND ANY ONLY OUT OFF EVER ONCE OVER UNDER ELSE".split())
_ONSETS = ("BL BR CH CL CR DR FL FR GL GR KN PH PL PR QU SC SCH SCR SH SK SL SM SN SP SPL SPR ST STR "
           "SW TH THR TR TW WH WR").split()
_VOWELS = "(?:AI|AU|EA|EE|EI|IE|OA|OI|OO|OU|[AEIOU])"
_CONSONANT = "[B-DF-HJ-NP-TV-Z]"
# A final Y after the onset is a vowel too (MY, WHY, TRY).
_SYLLABLES = re.compile(f"(?:{'|'.join(_ONSETS)}|{_CONSONANT})"
                        f"(?:{_VOWELS}(?:{_CONSONANT}{{1,2}}{_VOWELS})*{_CONSONANT}{{0,2}}|Y)")
_CAPITALS = re.compile(r"([A-Z]{2,5})(s?)")
_SPELLED = re.compile(r"[A-Z](?:-[A-Z])+")


def spell(letters: str) -> str:
    """Letters said one by one ("USA" → "U-S-A-", see the module's note on A)."""
    return "-".join(letters) + ("-" if letters[-1:] in ("A", "a") else "")


def is_acronym(text: str) -> bool:
    """Whether a word is capitals said letter by letter (see the module's rule)."""
    match = _CAPITALS.fullmatch(text)
    return bool(match) and match[1] not in READ_AS_WORDS and not _SYLLABLES.fullmatch(match[1])


def say_capitals(text: str) -> str:
    """An acronym spelled (its plural "s" kept), anything else as it is."""
    if not is_acronym(text):
        return text
    letters, plural = _CAPITALS.fullmatch(text).groups()
    said = spell(letters)
    if plural and said.endswith("-"):
        # After a final A espeak-ng says "-s" as a letter ("N-B-A-s": "... uh ess") and "As" as a
        # word ("... az"); "A's" is the plural it says right.
        return said[:-1] + "'s"
    return said + plural


def read_acronym(words: Sequence[Word], i: int) -> Reading | None:
    word = words[i]
    if _SPELLED.fullmatch(word.core):  # "U-S-A": spelled already, but for its final A
        return Reading.each(word.say(spell(word.core.replace("-", ""))))
    return Reading.each(word.say(say_capitals(word.core))) if is_acronym(word.core) else None
