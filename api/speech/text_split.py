"""Cuts a speech's text into segments by text alone (no prompt preparation): the first sentence
first, then whole sentences in segments that grow; and, for a prepared segment that turns out
too long, the cut nearest a length at the most natural boundary.

Every function here returns consecutive pieces of its input, stripped of the whitespace between
them, and cuts only where whitespace is or where Chinese and Japanese text may break without it
(after its full-width punctuation, between two ideographs or kana), except `cut_near` inside a
single over-long word: so the pieces hold the input's words, each once, in order. A word is a
run without whitespace, or one ideograph or kana: each takes about as long to say.

A period after an abbreviation that ends no sentence ("Dr.", "e.g.", an initial as in "J. R. R.
Tolkien") is no sentence end here either: a cut there would make the voice pause inside a name.
"""
from __future__ import annotations

import re

from model.text.normalize.english import NOT_SENTENCE_ENDS

# Chinese and Japanese script: kana, CJK ideographs (with extension A and compatibility forms).
_IDEOGRAPHIC = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
IDEOGRAPH = re.compile(f"[{_IDEOGRAPHIC}]")
# Finer and finer boundaries: sentences (and line breaks), clauses, words. Full-width punctuation
# ends a sentence or clause with no space after it, as those scripts write.
SENTENCE = re.compile(r"(?<=[.!?…])[\"'”’)\]]*\s+|(?<=[。！？])[」』”’）)\]]*\s*|\n\s*")
CLAUSE = re.compile(r"(?<=[,;:—–])\s+|(?<=[，；：、])\s*")
# Whitespace, or either side of an ideograph or kana (each is a word of its own).
WORD = re.compile(f"\\s+|(?<=[{_IDEOGRAPHIC}])(?=\\S)|(?<=\\S)(?=[{_IDEOGRAPHIC}])")
_BOUNDARIES = (SENTENCE, CLAUSE, WORD)
_INITIAL = re.compile(r"[A-Z]\.")
_LONGEST_ABBREVIATION = max(map(len, NOT_SENTENCE_ENDS))


class UnspeakableText(ValueError):
    """An input that cannot become speech, for a reason the client is told (a 400)."""


class UncuttableText(UnspeakableText):
    """Text with a run of characters without whitespace too long to cut sensibly (a segment
    could only end inside it): refused, never prepared."""


def check_runs(text: str, max_run_chars: int) -> None:
    """Raises UncuttableText when `text` has a run of more than `max_run_chars` characters with
    no place to cut (whitespace, or an ideograph or kana, each a word of its own); linear in the
    text."""
    longest = max(map(len, IDEOGRAPH.sub(" ", text).split()), default=0)
    if longest > max_run_chars:
        raise UncuttableText(f"the text has a run of {longest} characters without whitespace; "
                             f"at most {max_run_chars} can be cut into speakable segments")


def _cut_ends(text: str, boundary: re.Pattern) -> list[int]:
    """Where the pieces of `text` at `boundary` end (each boundary's whitespace ends its piece),
    strictly inside the text."""
    return [match.end() for match in boundary.finditer(text)
            if 0 < match.end() < len(text) and not (boundary is SENTENCE and after_abbreviation(text, match))]


def after_abbreviation(text: str, match: re.Match) -> bool:
    """Whether a SENTENCE match on one line follows an abbreviation that ends no sentence (a line
    break cuts regardless). Looks back only as far as the longest such abbreviation."""
    if "\n" in match.group():
        return False
    start = max(0, match.start() - _LONGEST_ABBREVIATION - 1)
    words = text[start:match.start()].split()
    word = words[-1] if words else ""
    whole = start == 0 or len(word) < match.start() - start  # begins inside the window
    return whole and (word in NOT_SENTENCE_ENDS or _INITIAL.fullmatch(word) is not None)


def _word_count(text: str) -> int:
    """The pieces WORD cuts `text` into: what `split_first` and `cut_to_size` index by."""
    text = text.strip()
    return len(_cut_ends(text, WORD)) + 1 if text else 0


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


def pack_sentences(text: str, spoken_chars: int, max_chars: int, max_words: int | None = None) -> list[str]:
    """Consecutive segments of whole sentences. Each holds as many sentences as fit in a budget
    of the characters before it (`spoken_chars` precede `text`), at most `max_chars` and
    `max_words` words, and at least one: segments grow like the audio chunks do, so there are few
    joins and each segment is short against the audio already ahead of it. A sentence over
    either bound is first cut to size (`cut_to_size`), its pieces packed like sentences."""
    starts = [0, *_cut_ends(text, SENTENCE)]
    sentences = [piece for start, end in zip(starts, [*starts[1:], len(text)])
                 for piece in _sized(text[start:end], max_chars, max_words)]
    word_limit = max_words or len(text)
    segments: list[str] = []
    current, current_words = "", 0
    for sentence in sentences:
        words = _word_count(sentence)
        budget = min(max_chars, spoken_chars)
        if current and (len(current) + len(sentence) > budget or current_words + words > word_limit):
            segments.append(current.strip())
            spoken_chars += len(current)
            current, current_words = "", 0
        current += sentence
        current_words += words
    segments.append(current.strip())
    return [segment for segment in segments if segment]


def _sized(sentence: str, max_chars: int, max_words: int | None) -> list[str]:
    """The sentence as it is (its whitespace kept, which the front end may read) when it is within
    the bounds, else its pieces cut to size, each followed by a space."""
    if len(sentence.strip()) <= max_chars and (max_words is None or _word_count(sentence) <= max_words):
        return [sentence]
    return [piece + " " for piece in cut_to_size(sentence, max_chars, max_words)]


def plan_texts(text: str, first_max_words: int, max_chars: int, max_words: int | None = None) -> list[str]:
    """The segments of a speech: `split_first`'s first segment (cut to size too), then
    `pack_sentences`. Every segment has at most `max_chars` characters and `max_words` words
    (None: no bound on words beyond the first segment's)."""
    first, rest = split_first(text, first_max_words)
    firsts = cut_to_size(first, max_chars, max_words)
    spoken = sum(map(len, firsts))
    return [segment for segment in (*firsts, *pack_sentences(rest, spoken, max_chars, max_words)) if segment]


def cut_to_size(text: str, max_chars: int, max_words: int | None = None) -> list[str]:
    """`text` as consecutive pieces of at most `max_chars` characters and `max_words` words, each
    cut where `cut_near` would (the coarsest boundary that fits). Linear in the text: each cut
    looks only at the next `max_chars` + 1 characters."""
    pieces = []
    text = text.strip()
    while text:
        window = text[:max_chars + 1]
        limit = max_chars
        if max_words is not None:
            word_starts = _cut_ends(window, WORD)  # where words 2, 3, ... begin
            if len(word_starts) >= max_words:
                limit = min(limit, word_starts[max_words - 1])
        if len(text) <= limit:
            pieces.append(text)
            break
        end = _cut_point(window, limit)
        pieces.append(text[:end].strip())
        text = text[end:].strip()
    return pieces


def cut_near(text: str, max_chars: int) -> tuple[str, str]:
    """(head, tail) of a segment too long for one request: the head ends at the last boundary
    within `max_chars` characters of the coarsest kind that has one there (sentence, clause,
    word), else after `max_chars` characters (a word longer than that). Both are non-empty
    when `text` has two or more characters."""
    text = text.strip()
    end = _cut_point(text, max(1, min(max_chars, len(text) - 1)))
    return text[:end].strip(), text[end:].strip()


def _cut_point(text: str, limit: int) -> int:
    """Where `cut_near` cuts `text` for a head of at most `limit` characters (0 < limit < len)."""
    for boundary in _BOUNDARIES:
        ends = [end for end in _cut_ends(text, boundary) if end <= limit]
        if ends:
            return ends[-1]
    return limit
