"""Where each word of a text is spoken, from the voice's own phoneme durations.

espeak phonemizes whole sentences, and its output does not keep the text's words apart: it joins
unstressed ones ("in the" → `ɪnðə`), spells out numbers ("123" → three words) and drops
punctuation. So each written word is phonemized alone too, and the sentence's phonemes are
aligned to those (difflib over the sounds, stress and punctuation left out): every sound of the
sentence then belongs to one written word. A word is spoken from the end of whatever sound or
pause came before it (so the word space, stress marks and pads in between open it: VITS voices
start a word's onset there; pocketsphinx placed starts ~40 ms earlier than the first sound's own
ids) to the pad after its last sound. The durations are the ones the prompt is built from, so
the spans are exact to a frame. The text is phonemized as normalized (model/text), and a written
word spans every spoken word it became ("$3.50": "three dollars and fifty cents").

Phonemes written inline (`[[ təmˈeɪɾoʊ ]]`, frontend.py) are one written word each, the run as
written, brackets and all: a run of several phoneme words (`[[ hɛlˈoʊ wˈɜːld ]]`) spans them all,
as an entry the normalizer read as a whole does. Its phoneme words are its spoken words, whose
sounds are the run's own symbols (nothing is phonemized for them); punctuation that the front end
took from right after the run into its sentence belongs to no written word, being no sound.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np

from model.families.base import SpokenWord
from model.text import Normalized

# Phoneme symbols that are no sound of a word: word and clause breaks, punctuation, stress.
_NOT_SOUNDS = frozenset(" !'(),-.:;?\"ˈˌ")
# Of those, the ones that belong to the word after them (punctuation is a pause of its own).
_SILENT = frozenset(" ˈˌ")


@dataclass(frozen=True, slots=True)
class PhonemeRun:
    """Phonemes written inline in a text (`[[ ... ]]`). Invariant: `written` is the run as the text
    has it, brackets included; `words` are the phoneme words inside it (whitespace parted them),
    at least one, each a non-empty tuple of symbols the voice has ids for."""

    written: str
    words: tuple[tuple[str, ...], ...]

    @property
    def phonemes(self) -> list[str]:
        """The run as a sentence takes it: its words, the word separator between them."""
        phonemes = list(self.words[0])
        for word in self.words[1:]:
            phonemes += [" ", *word]
        return phonemes


# A text as its words were written: normalized text, or pieces of it with phoneme runs between.
Written = Normalized | Sequence[Normalized | PhonemeRun]


@dataclass(slots=True)
class _Sound:
    """One sound of the spoken phonemes: its symbol and the id positions [first, stop) it
    accounts for in the prompt: the word spaces, stress marks and pads since the sound or pause
    before it, its own ids, and the pad after them."""

    symbol: str
    first: int
    stop: int


def _sounds_of(sentences: Sequence[Sequence[str]], id_map: Mapping[str, Sequence[int]]) -> tuple[list[_Sound], int]:
    """The sounds of the sentences' phonemes, placed as Piper's `phonemes_to_ids` lays out each
    sentence (BOS, pad, then each known phoneme's ids and a pad, EOS), sentences back to back;
    and how many ids that makes."""
    sounds: list[_Sound] = []
    offset = 0
    for phonemes in sentences:
        position = offset + 2  # BOS and its pad
        onset = offset + 1
        for phoneme in phonemes:
            ids = id_map.get(phoneme)
            if ids is None:
                continue  # Piper skips it (with a warning): it has no ids
            if phoneme not in _NOT_SOUNDS:
                sounds.append(_Sound(phoneme, onset, position + len(ids) + 1))
            position += len(ids) + 1
            if phoneme not in _SILENT:
                onset = position
        offset = position + 1  # EOS
    return sounds, offset


def _word_of_each(sounds: list[_Sound], written: list[list[str]]) -> list[int]:
    """For each spoken sound, the index of the written word it belongs to (non-decreasing)."""
    spoken = [s.symbol for s in sounds]
    owners = [i for i, symbols in enumerate(written) for _ in symbols]
    expected = [symbol for symbols in written for symbol in symbols]
    labels: list[int | None] = [None] * len(spoken)
    matcher = difflib.SequenceMatcher(None, spoken, expected, autojunk=False)
    for tag, a0, a1, b0, b1 in matcher.get_opcodes():
        if tag == "equal":
            labels[a0:a1] = owners[b0:b1]
        elif tag == "replace":  # spread the spoken run over the written run, in order
            for k in range(a0, a1):
                labels[k] = owners[b0 + (k - a0) * (b1 - b0) // (a1 - a0)]
    # Sounds only the sentence has (a linking sound, say) go with the word before them.
    previous = next((label for label in labels if label is not None), 0)
    for k, label in enumerate(labels):
        labels[k] = previous = previous if label is None else label
    return labels  # type: ignore[return-value]


def _written_words(
    text: Written,
    id_map: Mapping[str, Sequence[int]],
    phonemize_word: Callable[[str], list[str]],
) -> tuple[list[str], list[int], list[list[str]]]:
    """The written words of `text`; for each of its spoken words in order, the index of the
    written word it belongs to and the sounds it is expected to have."""
    words: list[str] = []
    owners: list[int] = []
    sounds: list[list[str]] = []
    for piece in (text,) if isinstance(text, Normalized) else text:
        if isinstance(piece, PhonemeRun):
            owners += [len(words)] * len(piece.words)
            sounds += [[p for p in word if p not in _NOT_SOUNDS] for word in piece.words]
            words.append(piece.written)
            continue
        owners += [len(words) + k for k, (start, stop) in enumerate(piece.spans) for _ in range(start, stop)]
        sounds += [[p for p in phonemize_word(token) if p not in _NOT_SOUNDS and p in id_map]
                   for token in piece.text.split()]
        words += piece.written
    return words, owners, sounds


def spoken_words(
    text: Written,
    sentences: Sequence[Sequence[str]],
    durations: np.ndarray,
    id_map: Mapping[str, Sequence[int]],
    phonemize_word: Callable[[str], list[str]],
    frame_seconds: float,
) -> tuple[SpokenWord, ...]:
    """The written words of `text` (whitespace-separated, as written; a phoneme run as written)
    that are spoken, each with its span in seconds. `sentences` are the phonemes of `text`'s
    spoken form the prompt was built from, `durations` the frames of each of its ids,
    `phonemize_word` one word's phonemes alone."""
    words, owner, written = _written_words(text, id_map, phonemize_word)
    sounds, num_ids = _sounds_of(sentences, id_map)
    if durations.size != num_ids:
        raise ValueError(f"{durations.size} durations for a prompt of {num_ids} ids")
    if not sounds or not any(written):
        return ()
    ends = np.cumsum(durations)
    starts = ends - durations
    # Each spoken word's frames [first, stop), keyed by the written word it belongs to.
    spans: dict[int, tuple[int, int]] = {}
    for sound, word in zip(sounds, _word_of_each(sounds, written)):
        first, stop = spans.get(owner[word], (int(starts[sound.first]), 0))
        spans[owner[word]] = (first, int(ends[sound.stop - 1]))
    return tuple(
        SpokenWord(words[k], first * frame_seconds, stop * frame_seconds)
        for k, (first, stop) in sorted(spans.items())
    )
