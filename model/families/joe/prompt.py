"""Prompt processing of the built-in voice (runs in the API process): text → phonemes →
durations and time-aligned prior through the teacher's front end."""
from __future__ import annotations

import math

from model.families.base import AUTO_LANGUAGE, PromptFrontend, PromptTooLong, SpeechPrompt, VoiceNotFoundError
from model.sampling import SamplingParams
from model.families.joe.family import STEP_SLOT_ID
from model.families.joe.frontend import TeacherFrontend
from model.families.joe.student import StudentConfig

JOE_VOICES = ("joe",)


class JoePromptFrontend(PromptFrontend):
    """Builds `phoneme ids + [step slot]` with the prior [T, 192] as conditioning. Speaking rate
    goes through the duration model (a faster request has fewer frames, the same pitch) within
    `speed_range`: every phoneme keeps at least one frame, so beyond about 2x only a
    time-stretch (the API's) can go faster. English only; instructions are accepted and ignored.
    Phonemes written inline (`[[ təmˈeɪɾoʊ ]]`, espeak-ng's IPA) are said as written
    (frontend.py's InlineReading)."""

    languages = (AUTO_LANGUAGE, "english")
    speed_range = (0.5, 2.0)
    word_timestamps = True  # the duration model places every phoneme (words.py)
    always_normalizes = True  # phonemes are made from the normalized text (frontend.py)
    reads_phonemes = True  # Piper's `[[ ]]`: the voice's own phoneme ids, whatever espeak would say

    def __init__(self, config: StudentConfig, model_name: str = "joe") -> None:
        self.model_name = model_name
        self.voices = JOE_VOICES
        self.config = config
        self.teacher = TeacherFrontend()
        self.sample_rate = self.teacher.sample_rate

    def prepare(self, text: str, voice: str, speed: float = 1.0, max_tokens: int | None = None, *,
                language: str | None = None, instructions: str | None = None) -> SpeechPrompt:
        if voice not in self.voices:
            raise VoiceNotFoundError(voice, self.voices)
        self.check_language(language)
        if not speed > 0:
            raise ValueError(f"speed must be > 0, got {speed}")
        # NOTE: runs on worker threads, concurrently: espeak is serialized by its own lock
        # (frontend.py) and an onnxruntime session may run several calls at once.
        # The teacher's run grows with the phonemes (memory and time: 1,000 in one sentence take
        # ~90 MB and 0.6 s, 17,000 took 19 GB): they are counted first, and the step slot with them.
        phoneme_limit = None if max_tokens is None else max_tokens - 1
        try:
            prompt = self.teacher.speech_prompt(text, speed, max_phoneme_ids=phoneme_limit)
        except PromptTooLong as exc:
            if max_tokens is None or exc.limit != phoneme_limit:
                raise  # one sentence over the teacher's own bound
            raise PromptTooLong(exc.tokens + 1, max_tokens) from None
        prompt.token_ids.append(STEP_SLOT_ID)
        # The step slot's input depends on the prior, which the phonemes fix up to the length scale.
        prompt.cache_salt = f"{self.model_name}:speed={speed!r}"
        return prompt

    def check_phonemes(self, phonemes: str) -> None:
        self.teacher.phonemizer.inline_words(phonemes)

    def expected_outputs(self, prompt: SpeechPrompt) -> int | None:
        return math.ceil(prompt.num_frames / self.config.frames_per_step)

    def default_sampling(self) -> SamplingParams:
        # The student regresses its frames: nothing is sampled, and the length is the prompt's.
        return SamplingParams(temperature=0.0, max_tokens=8192)
