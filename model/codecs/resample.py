"""Whole-clip sample-rate conversion for the encoders that take a user's clip (a codec's encoder,
a speaker encoder), through FFmpeg's resampler (PyAV)."""
from __future__ import annotations

import av
import numpy as np


def resample_clip(samples: np.ndarray, source_rate: int, target_rate: int) -> np.ndarray:
    """A mono float clip at `target_rate` (the same array when the rates are equal). NOTE: the
    Qwen3-TTS reference resamples with librosa's soxr_hq; the filters differ, so what an encoder
    makes of a resampled clip is close to the reference's, not equal."""
    if source_rate <= 0 or target_rate <= 0:
        raise ValueError(f"sample rates must be positive, got {source_rate} -> {target_rate}")
    if source_rate == target_rate:
        return samples
    resampler = av.AudioResampler(format="flt", layout="mono", rate=target_rate)
    frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(samples, dtype=np.float32)[None], format="flt",
                                       layout="mono")
    frame.sample_rate = source_rate
    pieces = [piece.to_ndarray().reshape(-1) for piece in resampler.resample(frame) + resampler.resample(None)]
    return np.concatenate(pieces).astype(np.float32, copy=False) if pieces else np.zeros(0, dtype=np.float32)
