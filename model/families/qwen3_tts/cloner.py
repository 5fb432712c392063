"""A Qwen3-TTS base checkpoint's voice cloner: the speaker encoder's x-vector of a clip, and for
in-context cloning the 12 Hz codec encoder's codes of it (runs where prompts are prepared, once a
voice; never in the engine step)."""
from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from model.codecs.qwen3_12hz_encoder import Qwen3Encoder12Hz
from model.families.cloning import ClonedVoice, CloneRefused, VoiceCloner
from model.families.qwen3_tts.config import CODEC_FOLDER, Qwen3TtsConfig
from model.families.qwen3_tts.speaker_encoder import SpeakerEncoder
from model.families.qwen3_tts.speaker_mel import SAMPLE_RATE

logger = logging.getLogger("chorus.model")
# The arrays of a ClonedVoice it makes.
VECTOR_ARRAY = "speaker_vector"  # [talker hidden] float32
CODES_ARRAY = "reference_codes"  # [frames, code groups] int64, in_context only


class Qwen3Cloner(VoiceCloner):
    """The encoders of one base checkpoint. Invariant: `in_context` is True exactly when its
    codec folder carries encoder weights; every clone's vector has the talker's width and its
    codes (in_context) the codec's code groups."""

    def __init__(self, model_name: str, path: Path, config: Qwen3TtsConfig) -> None:
        if config.model_type != "base":
            raise CloneRefused(f"the model {model_name} ({config.model_type}) cannot clone voices: only a Qwen3-TTS "
                               "Base checkpoint can", param="voice")
        self.model_name = model_name
        self.sample_rate = SAMPLE_RATE
        self.speaker = SpeakerEncoder.from_checkpoint(path, config)
        self.codec: Qwen3Encoder12Hz | None = None
        try:
            self.codec = Qwen3Encoder12Hz.from_folder(path / CODEC_FOLDER)
        except (FileNotFoundError, ValueError) as exc:  # x-vector clones only
            logger.warning("%s clones from x-vectors only: its codec cannot encode clips (%s)", model_name, exc)
        self.in_context = self.codec is not None
        if self.codec is not None and self.codec.sample_rate != self.sample_rate:
            raise ValueError(f"the codec encoder takes {self.codec.sample_rate} Hz, the speaker encoder "
                             f"{self.sample_rate} Hz: one clip cannot feed both")

    def clone(self, samples: np.ndarray, transcript: str | None = None) -> ClonedVoice:
        try:
            arrays = {VECTOR_ARRAY: self.speaker.embed(samples, self.sample_rate).numpy()}
        except ValueError as exc:
            raise CloneRefused(f"the clip cannot be embedded: {exc}") from exc
        if transcript is None:
            return ClonedVoice(self.model_name, "x_vector", arrays)
        transcript = transcript.strip()
        if not transcript:
            raise CloneRefused("the transcript is empty: give the clip's words, or leave it out for an "
                               "x-vector clone", param="transcript")
        if self.codec is None:
            raise CloneRefused(f"the model {self.model_name}'s codec has no encoder, so it clones from the "
                               "speaker's timbre only: leave out the transcript", param="transcript")
        arrays[CODES_ARRAY] = self.codec.encode(samples, self.sample_rate).numpy()
        return ClonedVoice(self.model_name, "in_context", arrays, transcript)
