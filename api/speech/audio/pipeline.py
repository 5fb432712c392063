"""Model PCM → the bytes of one response: tempo, then resampling, then encoding."""
from __future__ import annotations

import numpy as np

from api.speech.audio.encoders import make_encoder
from api.speech.audio.resample import StreamingResampler
from api.speech.audio.tempo import TempoStretcher


class AudioPipeline:
    """One response's audio path. Invariant: stages see samples in order and are flushed in
    order on `finish`, so nothing a stage holds back is lost. Not thread-safe: the caller runs
    one call at a time (possibly on a worker thread)."""

    def __init__(self, response_format: str, source_rate: int, target_rate: int, speed: float) -> None:
        self.stretch = speed  # the audio out is this many times shorter than the model's
        self._tempo = TempoStretcher(source_rate, speed)
        self._resampler = StreamingResampler(source_rate, target_rate)
        self._encoder = make_encoder(response_format, target_rate)
        self._target_rate = target_rate
        self._samples_out = 0

    @property
    def source_seconds_out(self) -> float:
        """How much of the model's audio (in its own seconds) has reached the encoder: what
        the stages hold back (the stretcher's window, the resampler's filter) is not counted."""
        return self._samples_out / self._target_rate * self.stretch

    def process(self, pcm: np.ndarray) -> bytes:
        return self._encode(self._resampler.process(self._tempo.process(pcm)))

    def finish(self) -> bytes:
        resampled = self._resampler.process(self._tempo.flush())
        tail = self._encode(np.concatenate([resampled, self._resampler.flush()]))
        return tail + self._encoder.finish()

    def _encode(self, pcm: np.ndarray) -> bytes:
        self._samples_out += pcm.size
        return self._encoder.encode(pcm)
