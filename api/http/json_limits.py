"""JSON from clients, parsed only within a nesting depth: Python's parser recurses once per level
and raises RecursionError (not a ValueError) somewhere near a thousand, which a handler that
catches ValueError lets through as a 500 or a dropped socket. The depth is found first, by a scan
over its brackets outside strings (linear, in C), and a deeper document is refused before the
parser sees it."""
from __future__ import annotations

import json
import re
from typing import Any

# Chorus's own messages and bodies nest two levels ({"voice": {"id": ...}}); 32 leaves room for
# any client's extra fields without letting a body reach the parser's recursion limit.
MAX_JSON_DEPTH = 32
# A string, escapes included, in the unrolled form (no backtracking between runs); an unterminated
# one runs to the end of the text, so no match is retried from a quote inside it (quadratic).
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?', re.S)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_INNERMOST = re.compile(r"\[\]|\{\}")


class InvalidJson(ValueError):
    """A document that is not JSON, or nests deeper than allowed: the client's fault, a 400."""


def nesting_fault(text: str, max_depth: int) -> str | None:
    """Why `text` cannot be JSON within `max_depth` levels of arrays and objects (brackets inside
    strings do not count), or None when its brackets are fine. Each pass removes the innermost
    pairs, in C; `max_depth` passes at most, so the cost is linear in the text whatever it holds."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    for _ in range(max_depth):
        if not brackets:
            return None
        inner = _INNERMOST.sub("", brackets)
        if inner == brackets:
            return "its brackets do not match"
        brackets = inner
    return f"it nests more than {max_depth} levels deep" if brackets else None


def loads_bounded(raw: str | bytes, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """`json.loads(raw)`, or InvalidJson when `raw` is not UTF-8 JSON or nests deeper than
    `max_depth`."""
    try:
        text = raw.decode("utf-8") if isinstance(raw, (bytes, bytearray)) else raw
    except UnicodeDecodeError as exc:
        raise InvalidJson(f"not UTF-8: {exc.reason} at byte {exc.start}") from None
    if (fault := nesting_fault(text, max_depth)) is not None:
        raise InvalidJson(f"not JSON: {fault}")
    try:
        return json.loads(text)
    except ValueError as exc:
        raise InvalidJson(str(exc)) from None
