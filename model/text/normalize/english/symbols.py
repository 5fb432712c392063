"""English symbols said as words: "&" → "and", "@" → "at", "+" → "plus", alone or between the
parts of a word ("R&D" → "R and D", "AT&T" → "A-T and T", "@chorus" → "at chorus", "1+1" →
"one plus one"); one "/" between words is "or" ("yes/no" → "yes or no"), not said beside an
"and" or an "or" already there ("and/or" → "and or"); more are "slash" (a path: "docs/api/v1")."""
from __future__ import annotations

import re
from typing import Sequence

from model.text.normalize.english.letters import spell
from model.text.normalize.english.numbers import number
from model.text.normalize.rules import Reading, Word

_SAID = {"&": "and", "@": "at", "+": "plus"}
_SYMBOL = re.compile(r"([&@+/])")
_JOINED = re.compile(r"[\w'-]*(?:[&@+/][\w'-]*)+")


def _part(text: str) -> str:
    # Capitals joined by a symbol are letters, whatever their shape ("AT&T", "P&G").
    return number(text) or (spell(text) if text.isascii() and text.isupper() and len(text) <= 5 else text)


def say_symbols(text: str) -> str:
    pieces = [piece for piece in _SYMBOL.split(text) if piece]
    slash = "or" if text.count("/") == 1 else "slash"
    said = []
    for k, piece in enumerate(pieces):
        if piece == "/":
            if slash == "slash" or not {"and", "or"} & {p.lower() for p in pieces[max(0, k - 1):k + 2]}:
                said.append(slash)
        else:
            said.append(_SAID.get(piece) or _part(piece))
    return " ".join(said)


def read_symbol(words: Sequence[Word], i: int) -> Reading | None:
    word = words[i]
    if not word.core or not _JOINED.fullmatch(word.core):
        return None
    return Reading.each(word.say(say_symbols(word.core)))
