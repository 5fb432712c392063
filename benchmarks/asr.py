"""Word error rate by pocketsphinx (its bundled en-US model), measured the way MODELS.md says:
band-limited resampling to 16 kHz (FFmpeg's resampler), words normalized to lowercase letters
and apostrophes, errors summed over the whole set (not averaged per sentence)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from api.speech.audio.resample import StreamingResampler

ASR_RATE = 16000
ASR_FRAMES_PER_SECOND = 100


def normalize_words(text: str) -> list[str]:
    return re.findall(r"[a-z']+", text.lower().replace("-", " "))


def edit_distance(reference: Sequence[str], hypothesis: Sequence[str]) -> int:
    """Levenshtein distance over words (substitutions, insertions, deletions all cost 1)."""
    previous = list(range(len(hypothesis) + 1))
    for i, ref_word in enumerate(reference, 1):
        current = [i]
        for j, hyp_word in enumerate(hypothesis, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ref_word != hyp_word)))
        previous = current
    return previous[-1]


@dataclass(slots=True)
class WordErrors:
    """Summed edits over summed reference words. Invariant: errors >= 0, words >= 0."""

    errors: int = 0
    words: int = 0

    def add(self, reference: str, hypothesis: str) -> None:
        ref = normalize_words(reference)
        self.errors += edit_distance(ref, normalize_words(hypothesis))
        self.words += len(ref)

    @property
    def rate(self) -> float:
        return self.errors / max(1, self.words)


class Transcriber:
    """One pocketsphinx decoder (not thread-safe; one per thread)."""

    def __init__(self) -> None:
        from pocketsphinx import Decoder

        self._decoder = Decoder(samprate=ASR_RATE, loglevel="ERROR")

    def transcribe(self, pcm: np.ndarray, sample_rate: int) -> str:
        self._decode(pcm, sample_rate)
        hyp = self._decoder.hyp()
        return hyp.hypstr if hyp is not None else ""

    def words(self, pcm: np.ndarray, sample_rate: int) -> list[tuple[str, float, float]]:
        """The words heard, each with its start and end in seconds (pocketsphinx's 10 ms frames);
        silences, fillers and the utterance marks left out."""
        self._decode(pcm, sample_rate)
        heard = []
        for segment in self._decoder.seg():
            word = segment.word.split("(")[0]  # "the(2)": an alternative pronunciation
            if word and not word.startswith(("<", "[")):
                heard.append((word, segment.start_frame / ASR_FRAMES_PER_SECOND,
                              (segment.end_frame + 1) / ASR_FRAMES_PER_SECOND))
        return heard

    def _decode(self, pcm: np.ndarray, sample_rate: int) -> None:
        resampler = StreamingResampler(sample_rate, ASR_RATE)
        audio = np.concatenate([resampler.process(pcm.astype(np.float32)), resampler.flush()])
        raw = (np.clip(audio, -1.0, 1.0) * 32767).astype("<i2").tobytes()
        self._decoder.start_utt()
        self._decoder.process_raw(raw, full_utt=True)
        self._decoder.end_utt()
