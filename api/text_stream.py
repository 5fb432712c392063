"""Text that arrives in pieces (an LLM's reply, token by token) → segments ready to speak.

A segment is ready at a sentence end; a long sentence is cut at its last clause boundary once
enough words are buffered, and at a word boundary once even more are; `flush` makes the rest a
segment. Boundaries are those of api/text_split.py, and a boundary counts only once the
whitespace after it has arrived (a text that ends in "Dr." may go on "Dr. Smith"). A clause is
cut while its sentence is still arriving: the speech starts before the sentence is complete, at
the price that how a long sentence is cut depends on how fast its words came.
"""
from __future__ import annotations

from api.text_split import CLAUSE, SENTENCE, WORD

# A clause boundary ends a segment only after this many words: "Sure, I can help." stays one
# sentence, and short clauses keep their prosody; a run-on reply still starts to play.
CLAUSE_MIN_WORDS = 12


class TextStream:
    """Buffers text and hands out ready segments. Invariant: the segments handed out (by `add`
    and `flush`), joined with spaces, are the text added, whitespace aside, each word once, in
    order; `clear` drops what is buffered and nothing of it is handed out later."""

    def __init__(self, max_words: int = 30, clause_min_words: int = CLAUSE_MIN_WORDS) -> None:
        if not 0 < clause_min_words <= max_words:
            raise ValueError(f"need 0 < clause_min_words <= max_words, got {clause_min_words}, {max_words}")
        self.max_words = max_words
        self.clause_min_words = clause_min_words
        self._buffer = ""

    @property
    def buffered(self) -> str:
        return self._buffer

    def add(self, text: str) -> list[str]:
        """Appends `text`; returns the segments it completed, in order."""
        self._buffer += text
        ready = []
        while (end := self._next_cut()) is not None:
            segment, self._buffer = self._buffer[:end].strip(), self._buffer[end:]
            if segment:
                ready.append(segment)
        return ready

    def flush(self) -> str | None:
        """Everything buffered, as one segment (None when there is nothing but whitespace)."""
        segment, self._buffer = self._buffer.strip(), ""
        return segment or None

    def clear(self) -> None:
        self._buffer = ""

    def _next_cut(self) -> int | None:
        """Where the first ready segment of the buffer ends, or None while none is."""
        text = self._buffer
        sentence = SENTENCE.search(text)
        if sentence is not None and len(text[:sentence.end()].split()) <= self.max_words:
            return sentence.end()
        # The first sentence is long, or not complete yet: its first clause of enough words...
        head = text if sentence is None else text[:sentence.end()]
        for clause in CLAUSE.finditer(head):
            words = len(head[:clause.end()].split())
            if words > self.max_words:
                break
            if words >= self.clause_min_words:
                return clause.end()
        # ...or, past max_words complete words, those words.
        word_ends = [m.end() for m in WORD.finditer(head) if head[:m.start()].strip()]
        return word_ends[self.max_words - 1] if len(word_ends) >= self.max_words else None
