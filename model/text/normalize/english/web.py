"""English email addresses and web addresses, read the way people say them:
"jane.doe@example.com" → "jane dot doe at example dot com", "https://www.example.com/help" →
"w-w-w dot example dot com slash help" (the scheme is not said). A bare domain is read only with
a top-level domain from a short list, so "end.Then" stays as written."""
from __future__ import annotations

import re
from typing import Sequence

from model.text.normalize.english.letters import spell
from model.text.normalize.rules import Reading, Word

_SEPARATORS = {".": "dot", "@": "at", "/": "slash", "-": "dash", "_": "underscore", "+": "plus", ":": "colon"}
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+", re.ASCII)
_TOP_LEVEL = "com|org|net|edu|gov|io|ai|co|uk|us|ca|de|fr|dev|app|info|biz|me|tv"
_URL = re.compile(f"(?:https?://)?((?:www\\.)?[a-z0-9-]+(?:\\.[a-z0-9-]+)*\\.(?:{_TOP_LEVEL})(?:/[\\w./-]*)?)",
                  re.ASCII | re.IGNORECASE)
_URL_WITH_SCHEME = re.compile(r"https?://([\w.-]+(?:/[\w./-]*)?)", re.ASCII | re.IGNORECASE)


def say_address(text: str) -> str:
    """An address's parts as written, its separators said ("a.b@c" → "a dot b at c"), "www"
    spelled."""
    parts = [f" {_SEPARATORS[part]} " if part in _SEPARATORS else part
             for part in re.split(r"([./@_+:-])", text.rstrip("/")) if part]
    said = " ".join("".join(parts).split())
    return re.sub(r"\bwww\b", spell("w" * 3), said, flags=re.IGNORECASE)


def read_address(words: Sequence[Word], i: int) -> Reading | None:
    word = words[i]
    if _EMAIL.fullmatch(word.core):
        return Reading.each(word.say(say_address(word.core)))
    if match := _URL_WITH_SCHEME.fullmatch(word.core) or _URL.fullmatch(word.core):
        return Reading.each(word.say(say_address(match[1])))
    return None
