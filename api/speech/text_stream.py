"""Text that arrives in pieces (an LLM's reply, token by token) → segments ready to speak.

A segment is ready at a sentence end; a long sentence is cut at its last clause boundary once
enough words are buffered, and at a word boundary once even more are; `flush` makes the rest a
segment. Boundaries are those of api/speech/text_split.py, a period after an abbreviation that
ends no sentence ("Dr. Smith") included, and a boundary counts only once the whitespace after it
has arrived (a text that ends in "that." may go on "that.com"). A clause is
cut while its sentence is still arriving: the speech starts before the sentence is complete, at
the price that how a long sentence is cut depends on how fast its words came.

The cost is linear in the text added, whatever its shape (one huge message, a token at a time,
no boundary at all): each piece is scanned once, word by word, and what the scan has learnt
(words so far, what the last word ends with) is kept, so no later add scans it again; only a
clause cut rescans what was looked at past it, at most `max_words` words.
"""
from __future__ import annotations

import functools
import re

from api.speech.text_split import CLAUSE, SENTENCE, after_abbreviation

# A clause boundary ends a segment only after this many words: "Sure, I can help." stays one
# sentence, and short clauses keep their prosody; a run-on reply still starts to play.
CLAUSE_MIN_WORDS = 12

_RUN = re.compile(r"(\S*)(\s*)")  # a word and the whitespace after it (either may be empty)


@functools.lru_cache(maxsize=1024)
def _closes(char: str) -> bool:
    """Whether `char` (not whitespace) may stand between a sentence's end mark and the
    whitespace after it, as a closing quote or bracket does ("Stop.” He"): read from SENTENCE
    itself, so that text_split's patterns stay the one definition of a boundary."""
    return SENTENCE.fullmatch("." + char + " ", 1) is not None


def _ending(word: str, before: tuple[str, str]) -> tuple[str, str]:
    """What decides the boundary after a word: its last character that is not a closing one,
    and its last closing one after that ("" for none): "Stop.”" → (".", "”"). `word` is the
    word's latest piece, `before` the ending of its earlier pieces (("", "") for a new word).
    Scans only the closing characters at the piece's end."""
    end = len(word)
    while end and _closes(word[end - 1]):
        end -= 1
    if end == 0:  # all closing characters: they follow the earlier pieces' last other one
        return before[0], word[-1]
    return word[end - 1], word[-1] if end < len(word) else ""


@functools.lru_cache(maxsize=1024)
def _boundary_after(ending: tuple[str, str]) -> re.Pattern | None:
    """The boundary (SENTENCE, CLAUSE or None) that whitespace makes after a word whose ending
    (see `_ending`) this is."""
    probe = "".join(ending) + " "
    return SENTENCE if SENTENCE.search(probe) else CLAUSE if CLAUSE.search(probe) else None


def _ends_no_sentence(run: str) -> bool:
    """Whether the sentence end at the end of `run` (a whole word and the whitespace after it)
    follows an abbreviation that ends no sentence, by text_split's own rule."""
    *_, end = SENTENCE.finditer(run)
    return after_abbreviation(run, end)


class TextStream:
    """Buffers text and hands out ready segments. Invariant: the segments handed out (by `add`
    and `flush`), joined with spaces, are the text added, whitespace aside, each word once, in
    order; `clear` drops what is buffered and nothing of it is handed out later. The buffer
    holds no ready segment once `add` returns, and the scan state describes all of it: `_words`
    words followed by whitespace, then the run at its end (`_open`: a word, whose `_ending` and
    length are kept, or whitespace; None when the buffer is empty)."""

    def __init__(self, max_words: int = 30, clause_min_words: int = CLAUSE_MIN_WORDS) -> None:
        if not 0 < clause_min_words <= max_words:
            raise ValueError(f"need 0 < clause_min_words <= max_words, got {clause_min_words}, {max_words}")
        self.max_words = max_words
        self.clause_min_words = clause_min_words
        self._parts: list[str] = []  # the buffer, as added (joined only when a segment is cut)
        self._reset()

    def _reset(self) -> None:
        self._words = 0
        self._open: str | None = None  # "word", "space" or None
        self._ending = ("", "")  # of the open word (see `_ending`)
        self._word_chars = 0  # of the open word
        self._clause: int | None = None  # where the first clause cut that qualifies ends, in the text scanned

    @property
    def buffered(self) -> str:
        if len(self._parts) > 1:
            self._parts = ["".join(self._parts)]
        return self._parts[0] if self._parts else ""

    @property
    def open_word(self) -> str:
        """The word at the end of the buffer that may go on in the next piece ("" when the
        buffer ends in whitespace)."""
        return self._buffer_end(self._word_chars)  # 0 unless the buffer ends in a word

    def _buffer_end(self, chars: int) -> str:
        """The buffer's last `chars` characters."""
        pieces, wanted = [], chars
        for part in reversed(self._parts):
            if wanted <= 0:
                break
            pieces.append(part[-wanted:])
            wanted -= len(part)
        return "".join(reversed(pieces))

    def add(self, text: str) -> list[str]:
        """Appends `text`; returns the segments it completed, in order."""
        ready = []
        start = 0  # where the buffer's text begins in `text` (its earlier part is in `_parts`)
        while (cut := self._scan(text, start)) is not None:
            segment = ("".join(self._parts) + text[start:cut]).strip()
            if segment:
                ready.append(segment)
            self._parts, start = [], cut
            self._reset()
        if start < len(text):
            self._parts.append(text[start:])
        return ready

    def flush(self) -> str | None:
        """Everything buffered, as one segment (None when there is nothing but whitespace)."""
        segment = self.buffered.strip()
        self.clear()
        return segment or None

    def clear(self) -> None:
        self._parts = []
        self._reset()

    def _scan(self, text: str, start: int) -> int | None:
        """Scans `text` from `start` (the scan state describing the buffer before it); returns
        where the first ready segment ends in `text`, or None when none is, all of it scanned.
        A sentence end within `max_words` words comes first, then the first clause cut of at
        least `clause_min_words`, then the end of the `max_words`th word's whitespace; so the
        scan looks no further than that whitespace."""
        for run in _RUN.finditer(text, start):
            word, space = run.groups()
            if word:
                self._word(word)
            if not space:
                continue  # the end of the text
            begun = self._word_chars - len(word)  # of the word before it, in the buffer before `text`
            boundary = self._space(space)
            if boundary is SENTENCE and _ends_no_sentence(self._buffer_end(begun) + word + space):
                boundary = None
            if boundary is SENTENCE:
                return run.end()
            if boundary is CLAUSE and self._clause is None and self._words >= self.clause_min_words:
                self._clause = run.end()
            if self._words >= self.max_words:
                return run.end() if self._clause is None else self._clause
        return self._clause

    def _word(self, word: str) -> None:
        if self._open == "word":  # more of the word at the end of the buffer
            self._ending, self._word_chars = _ending(word, self._ending), self._word_chars + len(word)
        else:
            self._open, self._ending, self._word_chars = "word", _ending(word, ("", "")), len(word)

    def _space(self, space: str) -> re.Pattern | None:
        """Takes a run of whitespace; returns the boundary it makes (SENTENCE, CLAUSE or None).
        Whitespace that goes on from the buffer's end adds to a run already taken, which did
        not end a segment: it can only become a line break."""
        boundary = None
        if self._open == "word":  # the word before it is complete
            self._words += 1
            boundary = _boundary_after(self._ending)
        self._open, self._word_chars = "space", 0
        if boundary is not SENTENCE and SENTENCE.search(space):  # a line break
            boundary = SENTENCE
        return boundary
