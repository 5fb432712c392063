"""A user's clip as the encoders that take one (a codec's encoder, a speaker encoder) want it:
checked mono float samples, converted whole to their rate by FFmpeg's resampler (PyAV)."""
from __future__ import annotations

import av
import numpy as np
import torch


def encoder_input(audio: torch.Tensor | np.ndarray, sample_rate: int, target_rate: int) -> np.ndarray:
    """One mono float channel at `sample_rate` → float32 samples at `target_rate`. ValueError for
    anything else: integer PCM is refused rather than scaled (its full scale would be a guess);
    float peaks over 1 pass, as the reference lets them (decoders overshoot a little)."""
    clip = audio.detach().cpu().numpy() if isinstance(audio, torch.Tensor) else np.asarray(audio)
    if clip.ndim != 1 or not np.issubdtype(clip.dtype, np.floating):
        raise ValueError(f"audio must be one mono float channel, got {clip.dtype} of shape {clip.shape}")
    if clip.size == 0:
        raise ValueError("audio is empty")
    if not np.isfinite(clip).all():
        raise ValueError("audio holds NaN or infinite samples")
    clip = resample_clip(clip.astype(np.float32), sample_rate, target_rate)
    if clip.size == 0:
        raise ValueError(f"audio too short to resample from {sample_rate} Hz to {target_rate} Hz")
    return clip


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
