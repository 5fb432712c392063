"""Text → phoneme ids → durations and time-aligned prior: the teacher's front end, which is the
prompt processing of the joe voice family and the first half of its training data."""
from __future__ import annotations

from functools import lru_cache

import numpy as np

import torch
from piper.config import PiperConfig
from piper.phoneme_ids import phonemes_to_ids

from model.families.base import PromptTooLong, SpeechPrompt
from model.families.joe.espeak import Espeak
from model.families.joe.teacher import HOP_SAMPLES, PROMPT_CUT, GraphCut, Teacher, TeacherOutput, TeacherScales, voice_config
from model.families.joe.words import spoken_words
from model.text import as_written, normalize


# The most phoneme ids of one teacher run (one sentence, as espeak finds them): its time and
# memory grow faster than its length (on the 2-core CPU, 1,000 ids: 0.6 s, ~90 MB; 2,000: 1.6 s,
# ~200 MB; 17,000: 150 s, 19 GB). A sentence of prose has 50-300.
MAX_RUN_PHONEME_IDS = 1024


class Phonemizer:
    """Text → one phoneme-id list per sentence, exactly as Piper prepares this voice's input
    (espeak-ng with the data bundled in piper-tts, so it works offline)."""

    def __init__(self) -> None:
        self.config = PiperConfig.from_dict(voice_config())
        self._espeak = Espeak()

        # Words recur (the, to, your...): each is phonemized alone once per process.
        self.word_phonemes = lru_cache(maxsize=8192)(self._word_phonemes)

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
        caller cuts the text and asks again either way)."""
        normalized = normalize(text, "english") if self.normalizes else as_written(text)
        sentences = self.phonemizer.sentences(normalized.text)
        counts = [len(self.phonemizer.ids(phonemes)) for phonemes in sentences]
        if max_phoneme_ids is not None and sum(counts) > max_phoneme_ids:
            raise PromptTooLong(sum(counts), max_phoneme_ids)
        # One teacher run per sentence, whose time and memory grow faster than its phonemes.
        if max(counts, default=0) > MAX_RUN_PHONEME_IDS:
            raise PromptTooLong(max(counts), MAX_RUN_PHONEME_IDS)
        result = self._run_phonemes(sentences, text, speed)
        words = spoken_words(normalized, sentences, result.durations, self.phonemizer.config.phoneme_id_map,
                             self.phonemizer.word_phonemes, HOP_SAMPLES / self.sample_rate)
        return SpeechPrompt(
            token_ids=result.phoneme_ids.tolist(),
            conditioning=torch.from_numpy(result.prior),
            num_frames=result.num_frames,
            num_text_tokens=int(result.phoneme_ids.size),
            words=words,
        )
