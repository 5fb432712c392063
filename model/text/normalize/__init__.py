"""Text normalization: written text → the words a speaker says for it ("$3.50" → "three dollars
and fifty cents"), with where each written word went (`Normalized`).

One entry point, `normalize(text, language)`; each language is an ordered rule set (rules.py
says what a rule is), read by one reader (reader.py). A language is added by writing its rules
in a folder of its own and naming it in `_RULE_SETS`.
"""
from __future__ import annotations

from model.text.normalize.english import ENGLISH_RULES
from model.text.normalize.reader import Normalized, read
from model.text.normalize.rules import Rule

_RULE_SETS: dict[str, tuple[Rule, ...]] = {"english": ENGLISH_RULES}
LANGUAGES = tuple(_RULE_SETS)


def normalize(text: str, language: str = "english") -> Normalized:
    """`text` as it is to be spoken in `language` (one of LANGUAGES), with its alignment. Text
    that no rule reads comes back unchanged, character for character."""
    rules = _RULE_SETS.get(language)
    if rules is None:
        raise ValueError(f"no text normalization for {language!r}; there is for {', '.join(LANGUAGES)}")
    return read(text, rules)


def as_written(text: str) -> Normalized:
    """`text` read by no rule: itself, each written word its own span (what a reader that does
    not normalize says)."""
    return read(text, ())
