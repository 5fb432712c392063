"""Text → phoneme ids → durations and time-aligned prior: the teacher's front end, which is the
prompt processing of the joe voice family and the first half of its training data."""
from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from typing import Callable

import numpy as np

import torch
from piper.config import PiperConfig
from piper.const import BOS, EOS, PAD
from piper.phoneme_ids import phonemes_to_ids

from model.families.base import PhonemesRefused, PromptTooLong, SpeechPrompt
from model.families.joe.espeak import Espeak
from model.families.joe.teacher import HOP_SAMPLES, PROMPT_CUT, GraphCut, Teacher, TeacherOutput, TeacherScales, voice_config
from model.families.joe.words import PhonemeRun, Written, spoken_words
from model.text import Normalized, as_written, normalize
from model.text.inline_phonemes import split_at_runs


# The most phoneme ids of one teacher run (one sentence, as espeak finds them): its time and
# memory grow faster than its length (on the 2-core CPU, 1,000 ids: 0.6 s, ~90 MB; 2,000: 1.6 s,
# ~200 MB; 17,000: 150 s, 19 GB). A sentence of prose has 50-300.
MAX_RUN_PHONEME_IDS = 1024

# Punctuation right after a run: espeak, reading the text after the run on its own, would drop it
# (a "." with no word before it) or say it ("!" as "exclamation"), so the run's sentence takes it
# as espeak writes it after a word. An ellipsis is left to espeak, which says nothing for it.
_PUNCTUATION_AFTER_RUN = re.compile(r"\s*(?!\.\.)([.!?,;:])[.!?]*")
# The terminators espeak ends a sentence with; its clause pauses (",", ":", ";") take a space.
_SENTENCE_ENDS = frozenset(".!?")
# How long a run may be quoted in an error message.
_QUOTED_RUN = 60


class Phonemizer:
    """Text → one phoneme-id list per sentence, exactly as Piper prepares this voice's input
    (espeak-ng with the data bundled in piper-tts, so it works offline)."""

    def __init__(self) -> None:
        self.config = PiperConfig.from_dict(voice_config())
        self._espeak = Espeak()

        # Words recur (the, to, your...): each is phonemized alone once per process.
        self.word_phonemes = lru_cache(maxsize=8192)(self._word_phonemes)
        # What phonemes written inline may hold: every symbol with ids (one code point each: this
        # voice has no vowel clusters) but the sentence's frame and pads, and the word separator,
        # which whitespace writes.
        self.symbols = frozenset(self.config.phoneme_id_map) - {BOS, EOS, PAD, " "}

    def sentences(self, text: str) -> list[list[str]]:
        """The phonemes of each sentence of `text` that has any."""
        sentences = self._espeak.sentences(self.config.espeak_voice, text, self.config.vowel_clusters)
        return [p for p in sentences if p]

    def ids(self, phonemes: list[str]) -> list[int]:
        return phonemes_to_ids(phonemes, self.config.phoneme_id_map)

    def sentence_ids(self, text: str) -> list[list[int]]:
        return [self.ids(p) for p in self.sentences(text)]

    def _word_phonemes(self, word: str) -> tuple[str, ...]:
        return tuple(p for sentence in self.sentences(word) for p in sentence)

    def inline_words(self, phonemes: str) -> tuple[tuple[str, ...], ...]:
        """The words of phonemes written inline (what `[[ ]]` holds; whitespace parts them), each
        as the voice's symbols: code points after NFD, as espeak.py makes espeak's output. Raises
        PhonemesRefused naming every symbol the voice has no ids for."""
        words = tuple(tuple(word) for word in unicodedata.normalize("NFD", phonemes).split())
        unknown = dict.fromkeys(symbol for word in words for symbol in word if symbol not in self.symbols)
        if unknown:
            raise PhonemesRefused(self._refusal(list(unknown), phonemes))
        return words

    def _refusal(self, unknown: list[str], phonemes: str) -> str:
        # The code point too: a combining mark or a look-alike (ɡ and g) reads the same in print.
        names = ", ".join(f"{symbol!r} (U+{ord(symbol):04X})" for symbol in unknown)
        run = phonemes if len(phonemes) <= _QUOTED_RUN else phonemes[:_QUOTED_RUN] + "…"
        return (f"unknown phoneme{'s' if len(unknown) > 1 else ''} {names} in [[{run}]]; this voice has ids "
                f"for {len(self.symbols)} symbols, the IPA espeak-ng writes ({self.config.espeak_voice}), one "
                "code point each (tʃ, not ʧ); whitespace parts words")


def length_scale_for(raw_durations: np.ndarray, target_frames: float) -> float:
    """The length scale whose graph durations, ceil(raw * scale) in float32 as the voice computes
    them, sum closest to `target_frames` (bisection: the sum only grows with the scale)."""
    raw = raw_durations.astype(np.float32)

    def frames(scale: float) -> int:
        return int(np.ceil(raw * np.float32(scale)).sum())

    low, high = 1e-3, 1e3
    for _ in range(60):
        middle = (low * high) ** 0.5
        low, high = (middle, high) if frames(middle) < target_frames else (low, middle)
    return min((low, high), key=lambda scale: abs(frames(scale) - target_frames))


def inline_pieces(text: str) -> list[str]:
    """`text` split at its phoneme runs: text and the inside of a run alternating, text first and
    last (the text pieces may be empty). An empty run (`[[ ]]`) says nothing: it is a space of the
    text around it."""
    folded = [""]
    for written, run in split_at_runs(text):  # `[[ a ]] and [[ b ]]` is two runs
        folded[-1] += written
        if run[2:-2].strip():
            folded += [run[2:-2], ""]
        elif run:
            folded[-1] += " "
    return folded


class InlineReading:
    """A text with phoneme runs, read piece by piece in order: text through the normalizer and
    espeak, a run as written. A run stands where a word would: it continues the sentence it is
    written in and never ends one (whatever it holds); after a sentence's end it begins the next
    (on its own when nothing follows, as a last word without a full stop would); text after it
    continues its sentence. Whitespace in the text between a run and what is next to it is the
    word separator between their phonemes (none: one word, as in Piper). Invariant: `sentences`
    are the phonemes read so far, one non-empty list per sentence, and `pieces` the written text
    they came from; what comes next continues `sentences[-1]` while `open`, and `space` says
    whether whitespace parts it from what came before."""

    def __init__(self, phonemizer: Phonemizer, read_text: Callable[[str], Normalized]) -> None:
        self.phonemizer = phonemizer
        self.read_text = read_text
        self.sentences: list[list[str]] = []
        self.pieces: list[Normalized | PhonemeRun] = []
        self.open = False
        self.space = False

    def add_text(self, text: str, after_run: bool) -> None:
        if after_run:
            text = self._punctuation_after_run(text)
        normalized = self.read_text(text)
        sentences = self.phonemizer.sentences(normalized.text)
        self.space = text[:1].isspace()
        # espeak ends every piece's last sentence; only a terminator it wrote ends it in the text.
        self._join(sentences, closed=bool(sentences) and sentences[-1][-1] in _SENTENCE_ENDS)
        self.space = text[-1:].isspace() if sentences else any(c.isspace() for c in text)
        self.pieces.append(normalized)

    def add_run(self, run: PhonemeRun) -> None:
        self._join([run.phonemes], closed=False)
        self.space = False
        self.pieces.append(run)

    def _punctuation_after_run(self, text: str) -> str:
        """`text` less the punctuation it starts with, which the run's sentence takes."""
        match = _PUNCTUATION_AFTER_RUN.match(text)
        if match is None:
            return text
        mark = match.group(1)
        ends = mark in _SENTENCE_ENDS
        self.space = False
        self._join([[mark] if ends else [mark, " "]], closed=ends)
        return text[match.end():]

    def _join(self, sentences: list[list[str]], closed: bool) -> None:
        if not sentences:
            return
        first, *rest = sentences
        if self.open:
            current = self.sentences[-1]
            if self.space and current[-1] != " ":
                current.append(" ")
            current.extend(first)
        else:
            self.sentences.append(list(first))
        self.sentences.extend(rest)
        self.open = not closed


class TeacherFrontend:
    """Text → TeacherOutput through the teacher, one run per sentence, runs concatenated (the
    way Piper speaks multi-sentence text). With the default scales (no noise) the result is a
    deterministic function of the text and length_scale."""

    def __init__(self, cut: GraphCut = PROMPT_CUT, threads: int = 1) -> None:
        self.phonemizer = Phonemizer()
        self.teacher = Teacher(cut, threads)
        self.sample_rate = int(self.phonemizer.config.sample_rate)
        # Off only to measure what normalization buys (benchmarks/entity_wer.py's raw input).
        self.normalizes = True

    def run(self, text: str, scales: TeacherScales | None = None) -> TeacherOutput:
        scales = scales or TeacherScales()
        sentences = self.phonemizer.sentence_ids(text)
        if not sentences:
            raise ValueError(f"nothing to speak in {text!r}")
        return TeacherOutput.concatenate([self.teacher.run(ids, scales) for ids in sentences])

    def run_at_speed(self, text: str, speed: float) -> TeacherOutput:
        """`run` at length scale 1 / speed (see `_run_phonemes`)."""
        return self._run_phonemes(self.phonemizer.sentences(text), text, speed)

    def _run_phonemes(self, sentences: list[list[str]], text: str, speed: float) -> TeacherOutput:
        """The sentences' phonemes at length scale 1 / speed, corrected per sentence for the
        graph's per-phoneme ceil (which alone makes speed 2 only ~1.65x as fast): each sentence
        gets the length scale whose frame count is closest to its speed-1 count / speed."""
        if not sentences:
            raise ValueError(f"nothing to speak in {text!r}")
        parts = []
        for ids in map(self.phonemizer.ids, sentences):
            part = self.teacher.run(ids, TeacherScales())
            if speed != 1.0:
                if part.raw_durations is None:
                    raise ValueError(f"the {self.teacher.cut.name!r} cut has no raw durations for rate control")
                scale = length_scale_for(part.raw_durations, part.num_frames / speed)
                part = self.teacher.run(ids, TeacherScales(length_scale=scale))
            parts.append(part)
        return TeacherOutput.concatenate(parts)

    def speech_prompt(self, text: str, speed: float = 1.0, max_phoneme_ids: int | None = None) -> SpeechPrompt:
        """Phoneme ids as the prompt tokens, the prior [T, 192] as per-frame conditioning, and
        each written word's span from the durations. The text is normalized first ("$3.50" is
        said "three dollars and fifty cents"; text no rule reads is phonemized as it is). Raises
        PromptTooLong, before the teacher runs, when the spoken text has more than
        `max_phoneme_ids` phoneme ids, or one of its sentences more than MAX_RUN_PHONEME_IDS (the
        caller cuts the text and asks again either way). Phonemes written inline (`[[ ]]`) are
        said as written (InlineReading); a symbol the voice has no ids for raises
        PhonemesRefused, before anything is phonemized."""
        written, sentences = self._read(text)
        counts = [len(self.phonemizer.ids(phonemes)) for phonemes in sentences]
        if max_phoneme_ids is not None and sum(counts) > max_phoneme_ids:
            raise PromptTooLong(sum(counts), max_phoneme_ids)
        # One teacher run per sentence, whose time and memory grow faster than its phonemes.
        if max(counts, default=0) > MAX_RUN_PHONEME_IDS:
            raise PromptTooLong(max(counts), MAX_RUN_PHONEME_IDS)
        result = self._run_phonemes(sentences, text, speed)
        words = spoken_words(written, sentences, result.durations, self.phonemizer.config.phoneme_id_map,
                             self.phonemizer.word_phonemes, HOP_SAMPLES / self.sample_rate)
        return SpeechPrompt(
            token_ids=result.phoneme_ids.tolist(),
            conditioning=torch.from_numpy(result.prior),
            num_frames=result.num_frames,
            num_text_tokens=int(result.phoneme_ids.size),
            words=words,
        )

    def _read(self, text: str) -> tuple[Written, list[list[str]]]:
        """`text` as written, and the phonemes of each of its sentences."""
        if "[[" in text:  # the only cost to text without phoneme runs
            pieces = inline_pieces(text)
            if len(pieces) > 1:
                return self._read_inline(pieces)
            text = pieces[0]
        normalized = self._normalize(text)
        return normalized, self.phonemizer.sentences(normalized.text)

    def _read_inline(self, pieces: list[str]) -> tuple[Written, list[list[str]]]:
        # Every run is checked before any text is read: a refusal costs no espeak call.
        runs = [PhonemeRun(f"[[{run}]]", self.phonemizer.inline_words(run)) for run in pieces[1::2]]
        reading = InlineReading(self.phonemizer, self._normalize)
        reading.add_text(pieces[0], after_run=False)
        for run, text in zip(runs, pieces[2::2]):
            reading.add_run(run)
            reading.add_text(text, after_run=True)
        return reading.pieces, reading.sentences

    def _normalize(self, text: str) -> Normalized:
        return normalize(text, "english") if self.normalizes else as_written(text)
