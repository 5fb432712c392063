"""Text → phoneme ids → durations and time-aligned prior: the teacher's front end, which is the
prompt processing of the joe voice family and the first half of its training data."""
from __future__ import annotations

import threading

import torch
from piper.config import PiperConfig
from piper.phoneme_ids import phonemes_to_ids
from piper.phonemize_espeak import EspeakPhonemizer

from model.families.base import SpeechPrompt
from model.voices.joe.teacher import PROMPT_CUT, GraphCut, Teacher, TeacherOutput, TeacherScales, voice_config

# espeak-ng keeps one global state per process (voice, data dir), so calls are serialized.
_ESPEAK_LOCK = threading.Lock()


class Phonemizer:
    """Text → one phoneme-id list per sentence, exactly as Piper prepares this voice's input
    (espeak-ng with the data bundled in piper-tts, so it works offline)."""

    def __init__(self) -> None:
        self.config = PiperConfig.from_dict(voice_config())
        with _ESPEAK_LOCK:
            self._espeak = EspeakPhonemizer()

    def sentence_ids(self, text: str) -> list[list[int]]:
        with _ESPEAK_LOCK:
            sentences = self._espeak.phonemize(
                self.config.espeak_voice, text, vowel_clusters=self.config.vowel_clusters
            )
        return [phonemes_to_ids(p, self.config.phoneme_id_map) for p in sentences if p]


class TeacherFrontend:
    """Text → TeacherOutput through the teacher, one run per sentence, runs concatenated (the
    way Piper speaks multi-sentence text). With the default scales (no noise) the result is a
    deterministic function of the text and length_scale."""

    def __init__(self, cut: GraphCut = PROMPT_CUT, threads: int = 1) -> None:
        self.phonemizer = Phonemizer()
        self.teacher = Teacher(cut, threads)
        self.sample_rate = int(self.phonemizer.config.sample_rate)

    def run(self, text: str, scales: TeacherScales | None = None) -> TeacherOutput:
        scales = scales or TeacherScales()
        sentences = self.phonemizer.sentence_ids(text)
        if not sentences:
            raise ValueError(f"nothing to speak in {text!r}")
        return TeacherOutput.concatenate([self.teacher.run(ids, scales) for ids in sentences])

    def speech_prompt(self, text: str, length_scale: float = 1.0) -> SpeechPrompt:
        """Phoneme ids as the prompt tokens, the prior [T, 192] as per-frame conditioning."""
        result = self.run(text, TeacherScales(length_scale=length_scale))
        return SpeechPrompt(
            token_ids=result.phoneme_ids.tolist(),
            conditioning=torch.from_numpy(result.prior),
            num_frames=result.num_frames,
            num_text_tokens=int(result.phoneme_ids.size),
        )
