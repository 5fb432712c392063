"""Model PCM → the bytes of one response: tempo, then resampling, then encoding."""
from __future__ import annotations

import numpy as np

from api.speech.audio.encoders import make_encoder
from api.speech.audio.resample import StreamingResampler
from api.speech.audio.tempo import TempoStretcher
from api.speech.off_loop import off_loop_unless


# Formats whose encoding is a cast to 16-bit samples (no codec to run).
RAW_PCM_FORMATS = ("pcm", "wav")
# A chunk of at most this many samples, in a raw PCM format at the model's own speed, is processed
# on the event loop: resampling it costs tens of microseconds (4,096 samples: about 70 us on the
# 2-core machine), less than handing it to a worker thread and back (about 0.1 ms of CPU a
# handoff, measured: 512 samples took 180 us of CPU through asyncio.to_thread, 60 us inline).
INLINE_SAMPLES = 8192


class AudioPipeline:
    """One response's audio path. Invariant: stages see samples in order and are flushed in
    order on `finish`, so nothing a stage holds back is lost. Not thread-safe: the caller runs
    one call at a time (possibly on a worker thread, `process_off_loop`)."""

    def __init__(self, response_format: str, source_rate: int, target_rate: int, speed: float) -> None:
        self.stretch = speed  # the audio out is this many times shorter than the model's
        self._tempo = TempoStretcher(source_rate, speed)
        self._resampler = StreamingResampler(source_rate, target_rate)
        self._encoder = make_encoder(response_format, target_rate)
        self._target_rate = target_rate
        self._samples_out = 0
        self._cheap = response_format in RAW_PCM_FORMATS and speed == 1.0

    def runs_inline(self, samples: int) -> bool:
        """Whether `process_off_loop` runs a chunk of `samples` on the caller's thread."""
        return self._cheap and samples <= INLINE_SAMPLES

    async def process_off_loop(self, pcm: np.ndarray) -> bytes:
        """`process`, on a worker thread so that the event loop (and with it every other stream)
        never waits on a codec or a stretch; a short raw-PCM chunk runs inline, where it costs
        less than the handoff."""
        return await off_loop_unless(self.runs_inline(pcm.size), self.process, pcm)

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
