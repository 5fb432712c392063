"""The speaker encoder's input: a 24 kHz clip's log-mel spectrogram, computed as the Qwen3-TTS
reference computes it (Hann-windowed STFT without centring, on a clip reflect-padded by
(n_fft - hop) / 2 each side; magnitude; Slaney mel filterbank; natural log clipped at 1e-5).

The reference takes its filterbank from librosa; `slaney_filterbank` computes the same one here
(Chorus does not depend on librosa)."""
from __future__ import annotations

import numpy as np
import torch

SAMPLE_RATE = 24000  # the reference refuses any other rate for its speaker features
N_FFT = WINDOW = 1024
HOP = 256
NUM_MELS = 128
F_MIN, F_MAX = 0.0, 12000.0
# Inside the square root, so silent bins have a finite log (the reference's constant).
MAGNITUDE_EPS = 1e-9
LOG_FLOOR = 1e-5
EDGE_PAD = (N_FFT - HOP) // 2

# Slaney's mel scale: linear (200/3 Hz per mel) below 1 kHz, logarithmic above.
_HZ_PER_MEL = 200.0 / 3.0
_LOG_FROM_HZ = 1000.0
_LOG_FROM_MEL = _LOG_FROM_HZ / _HZ_PER_MEL
_LOG_STEP = np.log(6.4) / 27.0


def _hz_to_mel(hz: np.ndarray) -> np.ndarray:
    high = _LOG_FROM_MEL + np.log(np.maximum(hz, _LOG_FROM_HZ) / _LOG_FROM_HZ) / _LOG_STEP
    return np.where(hz >= _LOG_FROM_HZ, high, hz / _HZ_PER_MEL)


def _mel_to_hz(mel: np.ndarray) -> np.ndarray:
    high = _LOG_FROM_HZ * np.exp(_LOG_STEP * (np.maximum(mel, _LOG_FROM_MEL) - _LOG_FROM_MEL))
    return np.where(mel >= _LOG_FROM_MEL, high, mel * _HZ_PER_MEL)


def slaney_filterbank(sample_rate: int, n_fft: int, num_mels: int, f_min: float, f_max: float) -> np.ndarray:
    """[num_mels, n_fft // 2 + 1] float32 triangles on the Slaney mel scale, each scaled by
    2 / its width in Hz (equal area), librosa's default `filters.mel`."""
    bins = np.fft.rfftfreq(n_fft, 1.0 / sample_rate)
    edges = _mel_to_hz(np.linspace(_hz_to_mel(np.float64(f_min)), _hz_to_mel(np.float64(f_max)), num_mels + 2))
    lower, centre, upper = edges[:-2, None], edges[1:-1, None], edges[2:, None]
    rising = (bins - lower) / (centre - lower)
    falling = (upper - bins) / (upper - centre)
    # NOTE: rounded to float32 before the area scaling, then again after, as librosa does.
    triangles = np.maximum(0.0, np.minimum(rising, falling)).astype(np.float32)
    return (triangles * (2.0 / (upper - lower))).astype(np.float32)


def samples_for_frames(frames: int) -> int:
    """The fewest samples that give `frames` frames; at least EDGE_PAD + 1, as reflect padding
    needs more samples than it adds."""
    return max(EDGE_PAD + 1, N_FFT - 2 * EDGE_PAD + (frames - 1) * HOP)


class LogMel:
    """The reference's log-mel of one mono float clip at SAMPLE_RATE: [frames, NUM_MELS] float32,
    frames = (samples + 2 * EDGE_PAD - N_FFT) // HOP + 1. The filterbank and window are built once."""

    def __init__(self, device: torch.device | str = "cpu") -> None:
        self.filterbank = torch.from_numpy(slaney_filterbank(SAMPLE_RATE, N_FFT, NUM_MELS, F_MIN, F_MAX)).to(device)
        self.window = torch.hann_window(WINDOW, device=device)

    def __call__(self, clip: torch.Tensor) -> torch.Tensor:
        padded = torch.nn.functional.pad(clip[None, None], (EDGE_PAD, EDGE_PAD), mode="reflect")[0]
        spectrum = torch.stft(padded, N_FFT, hop_length=HOP, win_length=WINDOW, window=self.window,
                              center=False, onesided=True, return_complex=True)
        magnitude = torch.sqrt(torch.view_as_real(spectrum).pow(2).sum(-1) + MAGNITUDE_EPS)
        return torch.log(torch.clamp(self.filterbank @ magnitude, min=LOG_FLOOR))[0].T
