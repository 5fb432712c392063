"""Cuts a long input into pieces that each fit one request, at the most natural boundary."""
from __future__ import annotations

import re
from typing import Callable

# Finer and finer boundaries: sentences (and line breaks), clauses, words. A piece that still
# does not fit after words is cut by characters.
_BOUNDARIES = (
    re.compile(r"(?<=[.!?…。！？])[\"'”’)\]]*\s+|\n\s*"),
    re.compile(r"(?<=[,;:—–])\s+"),
    re.compile(r"\s+"),
)


def _pieces(text: str, level: int) -> list[str]:
    if level >= len(_BOUNDARIES):
        return list(text)
    pieces, start = [], 0
    for match in _BOUNDARIES[level].finditer(text):
        pieces.append(text[start:match.end()])
        start = match.end()
    pieces.append(text[start:])
    return [piece for piece in pieces if piece]


def split_text(text: str, fits: Callable[[str], bool]) -> list[str]:
    """Splits `text` into consecutive segments, each accepted by `fits`, packing as many whole
    sentences into a segment as fit. The segments are the text's pieces in order, stripped of
    the whitespace between them: no word is lost or repeated at a join."""
    return [segment.strip() for segment in _pack(text, fits, 0) if segment.strip()]


def _pack(text: str, fits: Callable[[str], bool], level: int) -> list[str]:
    segments: list[str] = []
    current = ""
    for piece in _pieces(text, level):
        if fits((current + piece).strip()):
            current += piece
            continue
        if current.strip():
            segments.append(current)
        if fits(piece.strip()) or level >= len(_BOUNDARIES):
            # NOTE: a single character that does not fit is kept; the engine refuses it by name.
            current = piece
        else:
            finer = _pack(piece, fits, level + 1)
            segments.extend(finer[:-1])
            current = finer[-1] if finer else ""
    segments.append(current)
    return segments
