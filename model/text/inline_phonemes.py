"""Phonemes written inline, Piper's way: `[[ h ə l oʊ ]]` in a text is said as those phonemes
(whitespace inside separates words). A front end that `reads_phonemes` (model/families/base.py)
speaks them; SSML's `phoneme` and a lexicon's phoneme entries are written in this form too.

This is a bracket syntax, not markup: a run opens at `[[` and closes at the next `]]`; an
unclosed `[[` is text.
"""
from __future__ import annotations

from typing import Iterator


def split_at_runs(text: str) -> Iterator[tuple[str, str]]:
    """`text` as pairs of written text and the phoneme run after it, brackets included ("" after
    the last). Found with str.find: linear, where a lazy regex is quadratic in the unclosed `[[`
    of a hostile text."""
    start = 0
    while (opening := text.find("[[", start)) >= 0 and (closing := text.find("]]", opening + 2)) >= 0:
        yield text[start:opening], text[opening:closing + 2]
        start = closing + 2
    yield text[start:], ""


def phoneme_runs(text: str) -> Iterator[str]:
    """The phonemes of each closed run in `text`, in order (as written inside the brackets)."""
    if "[[" not in text:
        return iter(())
    return (run[2:-2] for _, run in split_at_runs(text) if run)


def _open_run(text: str) -> bool:
    """Whether `text` ends inside a run: a `[[` after the last `]]` (or with none)."""
    opened = text.rfind("[[")
    return opened >= 0 and text.find("]]", opened + 2) < 0


def keep_phoneme_runs_whole(head: str, tail: str) -> tuple[str, str]:
    """A text cut in two as `head` + `tail`, moved so that no run is cut: when `head` ends inside
    one, the cut goes before that run's `[[` instead (or, if the run opens the head, after its `]]`)."""
    if not _open_run(head):
        return head, tail
    opened = head.rfind("[[")
    if head[:opened].strip():
        return head[:opened].rstrip(), (head[opened:] + " " + tail).strip()
    whole = head + " " + tail
    closed = whole.find("]]", opened + 2)
    if closed < 0:  # never closed: text, cut where it was
        return head, tail
    return whole[:closed + 2].strip(), whole[closed + 2:].strip()


def join_split_phoneme_runs(pieces: list[str]) -> list[str]:
    """`pieces` (consecutive cuts of one text) with every piece that ends inside a run joined to
    the pieces after it up to the one that closes it (a `[[` that nothing closes is text, and
    joins nothing)."""
    closes_later = [False] * (len(pieces) + 1)  # whether a `]]` comes in pieces[k:]
    for k in range(len(pieces) - 1, -1, -1):
        closes_later[k] = closes_later[k + 1] or "]]" in pieces[k]
    joined: list[str] = []
    for k, piece in enumerate(pieces):
        if joined and closes_later[k] and _open_run(joined[-1]):
            joined[-1] = f"{joined[-1]} {piece}"
        else:
            joined.append(piece)
    return joined
