"""Cuts a speech's text into segments by text alone (no prompt preparation): the first sentence
first, then whole sentences in segments that grow; and, for a prepared segment that turns out
too long, the cut nearest a length at the most natural boundary.

Every function here returns consecutive pieces of its input, stripped of the whitespace between
them, and cuts only where whitespace is (except `cut_near` inside a single over-long word): so
joining the pieces with spaces gives the input's words, each once, in order.
"""
from __future__ import annotations

import re

# Finer and finer boundaries: sentences (and line breaks), clauses, words.
SENTENCE = re.compile(r"(?<=[.!?…。！？])[\"'”’)\]]*\s+|\n\s*")
CLAUSE = re.compile(r"(?<=[,;:—–])\s+")
WORD = re.compile(r"\s+")
_BOUNDARIES = (SENTENCE, CLAUSE, WORD)


class UncuttableText(ValueError):
    """Text with a run of characters without whitespace too long to cut sensibly (a segment
    could only end inside it): refused, never prepared."""


def check_runs(text: str, max_run_chars: int) -> None:
    """Raises UncuttableText when `text` has a run of more than `max_run_chars` characters
    without whitespace (linear in the text)."""
    longest = max(map(len, text.split()), default=0)
    if longest > max_run_chars:
        raise UncuttableText(f"the text has a run of {longest} characters without whitespace; "
                             f"at most {max_run_chars} can be cut into speakable segments")


def _cut_ends(text: str, boundary: re.Pattern) -> list[int]:
    """Where the pieces of `text` at `boundary` end (each boundary's whitespace ends its piece),
    strictly inside the text."""
    return [match.end() for match in boundary.finditer(text) if 0 < match.end() < len(text)]


def _word_count(text: str) -> int:
    return len(text.split())


def split_first(text: str, max_words: int) -> tuple[str, str]:
    """(first segment, the rest): the text up to its first sentence end; when that sentence has
    more than `max_words` words, its first clause if that has at most `max_words`, else its first
    `max_words` words."""
    text = text.strip()
    sentence_ends = _cut_ends(text, SENTENCE)
    end = sentence_ends[0] if sentence_ends else len(text)
    if _word_count(text[:end]) > max_words:
        clause_ends = _cut_ends(text[:end], CLAUSE)
        if clause_ends and _word_count(text[:clause_ends[0]]) <= max_words:
            end = clause_ends[0]
        else:
            end = _cut_ends(text[:end], WORD)[max_words - 1]
    return text[:end].strip(), text[end:].strip()


def pack_sentences(text: str, spoken_chars: int, max_chars: int) -> list[str]:
    """Consecutive segments of whole sentences. Each holds as many sentences as fit in a budget
    of the characters before it (`spoken_chars` precede `text`), at most `max_chars`, and at
    least one: segments grow like the audio chunks do, so there are few joins and each segment is
    short against the audio already ahead of it."""
    starts = [0, *_cut_ends(text, SENTENCE)]
    sentences = [text[start:end] for start, end in zip(starts, [*starts[1:], len(text)])]
    segments: list[str] = []
    current = ""
    for sentence in sentences:
        budget = min(max_chars, spoken_chars)
        if current and len(current) + len(sentence) > budget:
            segments.append(current.strip())
            spoken_chars += len(current)
            current = ""
        current += sentence
    segments.append(current.strip())
    return [segment for segment in segments if segment]


def plan_texts(text: str, first_max_words: int, max_chars: int) -> list[str]:
    """The segments of a speech: `split_first`'s first segment, then `pack_sentences`."""
    first, rest = split_first(text, first_max_words)
    return [segment for segment in (first, *pack_sentences(rest, len(first), max_chars)) if segment]


def cut_near(text: str, max_chars: int) -> tuple[str, str]:
    """(head, tail) of a segment too long for one request: the head ends at the last boundary
    within `max_chars` characters of the coarsest kind that has one there (sentence, clause,
    word), else after `max_chars` characters (a word longer than that). Both are non-empty
    when `text` has two or more characters."""
    text = text.strip()
    limit = max(1, min(max_chars, len(text) - 1))
    for boundary in _BOUNDARIES:
        ends = [end for end in _cut_ends(text, boundary) if end <= limit]
        if ends:
            return text[:ends[-1]].strip(), text[ends[-1]:].strip()
    return text[:limit].strip(), text[limit:].strip()
