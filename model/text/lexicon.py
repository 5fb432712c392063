"""Pronunciations: how to say words the voice would say wrong, given with a request or from a
server's file. An entry says its word through phonemes (IPA, written into the text as a
`[[ ... ]]` run for a model that reads phonemes) or as other text (a respelling: "SQL" →
"sequel").

How an entry finds its word in a text (`Lexicon.apply`):
- Case: an entry written all in lower case matches the word in any case ("tomato" matches
  "Tomato" and "TOMATO"); an entry with a capital letter matches only that casing ("US" does not
  match "us"). Where both kinds match the same words, the exact-case entry wins.
- Whole words: a match is neither preceded nor followed by a letter, digit or underscore, so
  "cat" is found in "cat," and "(cat)" but not inside "catalog".
- Several words: an entry of several words ("New York") matches them with any run of whitespace
  between them.
- Precedence: the text is read left to right; where several entries start at one place the
  longest wins. A later entry with the same word replaces an earlier one, and in `merged` the
  other lexicon's entry replaces this one's.
- Phoneme runs already in the text (`[[ ... ]]`) are never rewritten.

The cost of `apply` is linear in the text (one look-up per place a word may start, in an index
by each entry's first word), whatever the number of entries.
"""
from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from model.text.inline_phonemes import split_at_runs

MAX_REQUEST_ENTRIES = 1_000
MAX_FILE_ENTRIES = 100_000
MAX_WORD = 100
MAX_PHONEMES = 200
MAX_SAY_AS = 300
_KEYS = ("word", "phonemes", "say_as")
# What an entry is indexed by: its first word, or its first character when that is no word's.
_HEAD = re.compile(r"\w+|\S")
# Where a match may start: a character after none of a word's.
_STARTS = re.compile(r"(?<!\w)\S")
_WORD_CHARACTER = re.compile(r"\w")
_WHITESPACE = re.compile(r"\s+")
_LETTER_OR_DIGIT = re.compile(r"[^\W_]")
_NOT_IN_WORDS = re.compile(r"[][<>]")


class LexiconError(ValueError):
    """A pronunciation that cannot be used; the message names where it was given (the request's
    field or the file, and the entry's index), its word, and what is wrong."""


@dataclass(frozen=True, slots=True)
class Pronunciation:
    """How one word, or several, is said. Invariant: `word` holds a letter or a digit, no
    brackets, and single spaces between its words; exactly one of `phonemes` and `say_as` is
    set, non-empty, without brackets (so `say_as` can never smuggle in a phoneme run)."""

    word: str
    phonemes: str | None = None
    say_as: str | None = None

    def __post_init__(self) -> None:
        problem = self._problem()
        if problem:
            raise ValueError(problem)

    @property
    def exact_case(self) -> bool:
        """Whether the entry matches only its own casing (the module's case rule)."""
        return self.word != self.word.lower()

    @property
    def spoken(self) -> str:
        """What the text says in place of the word."""
        return self.say_as if self.phonemes is None else f"[[ {self.phonemes} ]]"

    def _problem(self) -> str | None:
        if not self.word:
            return "the word is empty"
        if self.word != " ".join(self.word.split()):
            return "the word has whitespace other than single spaces between its words"
        if not _LETTER_OR_DIGIT.search(self.word):
            return "the word holds no letter or digit"
        if len(self.word) > MAX_WORD:
            return f"the word is over {MAX_WORD} characters"
        if _NOT_IN_WORDS.search(self.word):
            return "the word may not hold [ ] < or >"
        if (self.phonemes is None) == (self.say_as is None):
            return "give phonemes or say_as" + ("" if self.phonemes is None else ", not both")
        key, value, longest = ("phonemes", self.phonemes, MAX_PHONEMES) if self.say_as is None \
            else ("say_as", self.say_as, MAX_SAY_AS)
        if not value.strip():
            return f"{key} is empty"
        if len(value) > longest:
            return f"{key} is over {longest} characters"
        if "[" in value or "]" in value:
            return f"{key} may not hold [ or ] (they delimit phoneme runs in the text)"
        return None


class Lexicon:
    """Pronunciations and an index to find them in a text. Invariant: `_entries` has one entry
    per word (the latest given for it); `_index` maps each entry's head (_HEAD, lower-cased) to
    the words of the entries with that head, longest first and, among equally long ones, the
    exact-case one first: the order in which `apply` tries them."""

    __slots__ = ("_entries", "_index")

    def __init__(self, pronunciations: Iterable[Pronunciation] = ()) -> None:
        self._entries: dict[str, Pronunciation] = {}
        self._index: dict[str, tuple[str, ...]] = {}
        self._add(pronunciations)

    @classmethod
    def of(cls, entries: Iterable[Mapping[str, object]], *, source: str = "pronunciations",
           limit: int = MAX_REQUEST_ENTRIES) -> "Lexicon":
        """The lexicon of `entries` ({"word", and "phonemes" or "say_as"}), each checked; errors
        name `source` and the entry's index. Raises LexiconError past `limit` entries."""
        pronunciations = []
        for index, entry in enumerate(entries):
            if index == limit:
                raise LexiconError(f"{source}: more than {limit} entries")
            pronunciations.append(_pronunciation(entry, f"{source}[{index}]"))
        return cls(pronunciations)

    @classmethod
    def read(cls, path: Path, *, limit: int = MAX_FILE_ENTRIES) -> "Lexicon":
        """The lexicon in a JSON file: an array of entries, or {"pronunciations": [...]}."""
        try:
            document = json.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as error:
            raise LexiconError(f"{path}: cannot read it: {error.strerror or error}") from None
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise LexiconError(f"{path}: not a JSON file: {error}") from None
        if isinstance(document, dict) and list(document) == ["pronunciations"]:
            document = document["pronunciations"]
        if not isinstance(document, list):
            raise LexiconError(f"{path}: must hold an array of pronunciations, or an object whose only "
                               "key is \"pronunciations\"")
        return cls.of(document, source=str(path), limit=limit)

    def merged(self, other: "Lexicon") -> "Lexicon":
        """Both lexicons' entries, `other`'s replacing this one's for the same word. Costs a copy
        of this one's tables (not a rebuild), so a large server lexicon merges per request."""
        merged = Lexicon()
        merged._entries, merged._index = dict(self._entries), dict(self._index)
        merged._add(other._entries.values())
        return merged

    def with_phonemes(self) -> tuple[Pronunciation, ...]:
        """The entries said through phonemes (what a caller checks the model can say)."""
        return tuple(entry for entry in self._entries.values() if entry.phonemes is not None)

    def without_phonemes(self) -> "Lexicon":
        """This lexicon less its entries said through phonemes (for a model that reads none)."""
        return Lexicon(entry for entry in self._entries.values() if entry.phonemes is None)

    def apply(self, text: str, *, phonemes: bool) -> str:
        """`text` with each match (the module's rules) replaced by what its entry says; entries
        said through phonemes are skipped unless `phonemes` (the caller refuses them first)."""
        if not self._entries:
            return text
        pieces = []
        for written, run in split_at_runs(text):
            pieces += [self._rewrite(written, phonemes), run]
        return "".join(pieces)

    def __len__(self) -> int:
        return len(self._entries)

    def __bool__(self) -> bool:
        return bool(self._entries)

    def _add(self, pronunciations: Iterable[Pronunciation]) -> None:
        heads: dict[str, set[str]] = defaultdict(set)
        for pronunciation in pronunciations:
            self._entries[pronunciation.word] = pronunciation
            heads[_head(pronunciation.word)].add(pronunciation.word)
        for head, words in heads.items():
            words.update(self._index.get(head, ()))
            self._index[head] = tuple(sorted(words, key=lambda word: (-len(word), word == word.lower(), word)))

    def _rewrite(self, text: str, phonemes: bool) -> str:
        pieces = []
        copied = 0  # characters of `text` consumed so far
        for start in _STARTS.finditer(text):
            if start.start() < copied:
                continue
            found = self._longest_at(text, start.start(), phonemes)
            if found is not None:
                end, pronunciation = found
                pieces += [text[copied:start.start()], pronunciation.spoken]
                copied = end
        pieces.append(text[copied:])
        return "".join(pieces)

    def _longest_at(self, text: str, start: int, phonemes: bool) -> tuple[int, Pronunciation] | None:
        """The first entry in the index's order written at `start`, and where it ends there."""
        for word in self._index.get(_head(text, start), ()):
            pronunciation = self._entries[word]
            if pronunciation.phonemes is not None and not phonemes:
                continue
            end = _end_of(pronunciation, text, start)
            if end is not None:
                return end, pronunciation
        return None


def _pronunciation(entry: object, where: str) -> Pronunciation:
    """One entry as given (a JSON object), checked; `where` names it in errors."""
    if not isinstance(entry, Mapping):
        raise LexiconError(f"{where}: an entry is an object with a word and its phonemes or say_as, "
                           f"not {type(entry).__name__}")
    word = entry.get("word")
    label = f"{where} ({word!r})" if isinstance(word, str) else where
    unknown = sorted(str(key) for key in entry if key not in _KEYS)
    if unknown:
        raise LexiconError(f"{label}: unknown key {', '.join(map(repr, unknown))}; an entry has {', '.join(_KEYS)}")
    values: dict[str, str | None] = {}
    for key in _KEYS:
        value = entry.get(key)
        if value is not None and not isinstance(value, str):
            raise LexiconError(f"{label}: {key} must be a string, not {type(value).__name__}")
        values[key] = None if value is None else " ".join(value.split())
    try:
        return Pronunciation(values["word"] or "", values["phonemes"], values["say_as"])
    except ValueError as error:
        raise LexiconError(f"{label}: {error}") from None


def _head(text: str, start: int = 0) -> str:
    return _HEAD.match(text, start).group().lower()


def _end_of(pronunciation: Pronunciation, text: str, start: int) -> int | None:
    """Where the entry's word ends when it is written in `text` at `start` (in its casing or
    any, by the case rule; any whitespace between its words; no word character after it)."""
    position = start
    for k, part in enumerate(pronunciation.word.split(" ")):
        if k:
            gap = _WHITESPACE.match(text, position)
            if gap is None:
                return None
            position = gap.end()
        written = text[position:position + len(part)]
        if (written if pronunciation.exact_case else written.lower()) != part:
            return None
        position += len(part)
    return None if _WORD_CHARACTER.match(text, position) else position
