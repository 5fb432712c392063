"""Streaming sample-rate conversion with FFmpeg's resampler (through PyAV)."""
from __future__ import annotations

import av
import numpy as np

from api.speech.audio.frames import to_frame, to_pcm


class StreamingResampler:
    """Converts one mono stream from `source_rate` to `target_rate` piece by piece. Invariant:
    the concatenation of every `process` result plus `flush` equals resampling the whole stream
    at once (the filter state carries across calls); equal rates pass samples through untouched."""

    def __init__(self, source_rate: int, target_rate: int) -> None:
        self.source_rate = source_rate
        self.target_rate = target_rate
        self._resampler = (
            None if source_rate == target_rate else av.AudioResampler(format="flt", layout="mono", rate=target_rate)
        )

    def process(self, pcm: np.ndarray) -> np.ndarray:
        if self._resampler is None or pcm.size == 0:
            return pcm.astype(np.float32, copy=False)
        return to_pcm(self._resampler.resample(to_frame(pcm, self.source_rate)))

    def flush(self) -> np.ndarray:
        if self._resampler is None:
            return np.zeros(0, dtype=np.float32)
        return to_pcm(self._resampler.resample(None))
