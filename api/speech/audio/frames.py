"""Conversions between float32 numpy PCM and PyAV audio frames (mono throughout)."""
from __future__ import annotations

from fractions import Fraction

import av
import numpy as np


def to_frame(pcm: np.ndarray, sample_rate: int, pts: int | None = None) -> av.AudioFrame:
    frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(pcm, dtype=np.float32)[None, :], format="flt", layout="mono")
    frame.sample_rate = sample_rate
    frame.time_base = Fraction(1, sample_rate)
    frame.pts = pts
    return frame


def to_pcm(frames: list[av.AudioFrame]) -> np.ndarray:
    """Frames in `flt` mono → one float32 array (empty when there are no frames)."""
    if not frames:
        return np.zeros(0, dtype=np.float32)
    return np.concatenate([frame.to_ndarray().reshape(-1) for frame in frames]).astype(np.float32, copy=False)
