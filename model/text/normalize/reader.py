"""Reads a text with a language's rules into its spoken form and alignment."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from model.text.normalize.rules import Reading, Rule, Word

_WHITESPACE_RUN = re.compile(r"\S+")


@dataclass(frozen=True, slots=True)
class Normalized:
    """Text as it is to be spoken, and where each written word went. Invariant: `written` are the
    original text's whitespace-delimited words in order, each once (a run that a rule read as a
    whole is one entry, as written); `spans[k]` is the [start, stop) range of `text.split()` that
    written[k] became; the spans are consecutive and cover `text.split()` exactly (a span may be
    empty: a word said as nothing)."""

    text: str
    written: tuple[str, ...]
    spans: tuple[tuple[int, int], ...]

    def spoken(self, k: int) -> list[str]:
        """The spoken words that written word k became."""
        start, stop = self.spans[k]
        return self.text.split()[start:stop]


def read(text: str, rules: Sequence[Rule]) -> Normalized:
    """`text` with each word replaced by what the first rule that reads it says (a word no rule
    reads stays as written), the whitespace between words kept as it was."""
    matches = list(_WHITESPACE_RUN.finditer(text))
    words = [Word.of(match.group()) for match in matches]
    pieces: list[str] = []
    written: list[str] = []
    spans: list[tuple[int, int]] = []
    said = 0  # spoken words so far
    copied = 0  # characters of `text` consumed so far
    i = 0
    while i < len(words):
        reading = _first_reading(rules, words, i) or Reading.each(words[i].text)
        # One replacement per written unit: a word, or the whole run read as one.
        if len(reading.spoken) == reading.count:
            runs = [(i + k, i + k + 1) for k in range(reading.count)]
        else:
            runs = [(i, i + reading.count)]
        for (first, stop), spoken in zip(runs, reading.spoken):
            start, end = matches[first].start(), matches[stop - 1].end()
            pieces.append(text[copied:start])
            pieces.append(spoken)
            copied = end
            written.append(text[start:end])
            count = len(spoken.split())
            spans.append((said, said + count))
            said += count
        i += reading.count
    pieces.append(text[copied:])
    return Normalized("".join(pieces), tuple(written), tuple(spans))


def _first_reading(rules: Sequence[Rule], words: Sequence[Word], i: int) -> Reading | None:
    for rule in rules:
        reading = rule(words, i)
        if reading is not None:
            if i + reading.count > len(words):
                raise ValueError(f"{rule.__name__} read past the end of the text")
            return reading
    return None
