"""Losses that compare a decoded waveform with the teacher's: multi-resolution STFT and mel.

The student decoder is trained against the teacher's waveform for the same z, so the target is
aligned sample for sample; a compressed complex-spectrum term therefore teaches phase as well as
magnitude (a plain magnitude loss would leave the phase free and the audio phasey).
"""
from __future__ import annotations

import math

import torch
from torch import Tensor
from torch.nn import functional as F

RESOLUTIONS = ((2048, 512), (1024, 256), (512, 128), (256, 64), (128, 32))
MEL_N_FFT = 1024  # the log-mel term reuses this resolution's magnitudes
_EPS = 1e-5


def _spectrum(audio: Tensor, n_fft: int, hop: int) -> Tensor:
    window = torch.hann_window(n_fft, device=audio.device, dtype=audio.dtype)
    return torch.stft(audio, n_fft, hop, window=window, center=False, return_complex=True)


def mel_filterbank(sample_rate: int, n_fft: int, mels: int, f_max: float | None = None) -> Tensor:
    """[mels, n_fft // 2 + 1] triangular filters on the HTK mel scale (Slaney-normalised)."""
    def to_mel(hz: Tensor) -> Tensor:
        return 2595.0 * torch.log10(1.0 + hz / 700.0)

    def to_hz(mel: Tensor) -> Tensor:
        return 700.0 * (10 ** (mel / 2595.0) - 1.0)

    f_max = f_max or sample_rate / 2
    freqs = torch.linspace(0, sample_rate / 2, n_fft // 2 + 1, dtype=torch.float64)
    edges = to_hz(torch.linspace(0, float(to_mel(torch.tensor(f_max))), mels + 2, dtype=torch.float64))
    lower, centre, upper = edges[:-2, None], edges[1:-1, None], edges[2:, None]
    rising = (freqs - lower) / (centre - lower)
    falling = (upper - freqs) / (upper - centre)
    bank = torch.clamp(torch.minimum(rising, falling), min=0.0)
    return (bank * (2.0 / (upper - lower))).float()


class WaveformDistillationLoss(torch.nn.Module):
    """loss(pred, target), both [B, samples]: mean over resolutions of spectral convergence +
    log-magnitude L1 + compressed-complex L1, plus log-mel L1. Zero iff pred == target."""

    def __init__(self, sample_rate: int, mels: int = 80, compress: float = 0.3) -> None:
        super().__init__()
        self.compress = compress
        self.register_buffer("mel", mel_filterbank(sample_rate, MEL_N_FFT, mels), persistent=False)

    def forward(self, pred: Tensor, target: Tensor) -> Tensor:
        total = pred.new_zeros(())
        for n_fft, hop in RESOLUTIONS:
            p, t = _spectrum(pred, n_fft, hop), _spectrum(target, n_fft, hop)
            p_mag, t_mag = p.abs().clamp(min=_EPS), t.abs().clamp(min=_EPS)
            convergence = torch.linalg.vector_norm(t_mag - p_mag) / torch.linalg.vector_norm(t_mag)
            log_mag = F.l1_loss(p_mag.log(), t_mag.log())
            complex_ = F.l1_loss(torch.view_as_real(p * p_mag ** (self.compress - 1)),
                                 torch.view_as_real(t * t_mag ** (self.compress - 1)))
            total = total + (convergence + log_mag + complex_) / len(RESOLUTIONS)
            if n_fft == MEL_N_FFT:
                total = total + F.l1_loss((self.mel @ p_mag).clamp(min=_EPS).log(),
                                          (self.mel @ t_mag).clamp(min=_EPS).log())
        return total


def snr_db(pred: Tensor, target: Tensor) -> float:
    """Signal-to-error ratio of pred against target, in dB (a report, not a loss)."""
    error = float(((pred - target) ** 2).sum())
    return 10 * math.log10(float((target ** 2).sum()) / max(error, 1e-12))
