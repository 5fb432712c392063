"""A cheaper decoder distilled from the voice's HiFi-GAN: its first stage, then an iSTFT head.

The HiFi-GAN spends ~78 % of its 22.7 M multiply-adds per frame in its last two upsampling
stages (64 and 256 samples per frame). This decoder keeps the teacher's own first stage (conv_pre,
the ×8 upsampling and its resblocks: 8 positions per frame, 128 channels, weights read from the
voice package and frozen) and replaces the rest with a small convolutional head that predicts, at
each of those positions, a 128-point spectrum (log-magnitude and phase), turned into samples by an
inverse STFT with hop 32 (the iSTFTNet / Vocos idea). The head is trained to reproduce the
teacher's waveform from the same z (`training/joe/train_decoder.py`).
"""
from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from torch import Tensor, nn
from torch.nn import functional as F

from model.paths import voice_cache
from model.families.joe.hifigan import _SLOPE, HifiGanConfig, HifiGanDecoder, _ResBlock
from model.families.joe.teacher import write_aside

HEAD_WEIGHTS_FILE = "decoder_head.safetensors"
HEAD_CONFIG_FILE = "decoder_head.json"
ONNX_INPUT, ONNX_OUTPUT = "z", "audio"


@dataclass(frozen=True, slots=True)
class IstftHeadConfig:
    """Shape of the head. Invariant (checked by IstftHead): n_fft is a multiple of the hop (32
    samples, the HiFi-GAN's first-stage position) and at least 4 hops, so the inverse STFT maps n
    positions to exactly n * hop samples with a constant window normalisation."""

    channels: int = 128
    kernel: int = 7
    resblock_dilations: tuple[int, ...] = (1, 3)
    n_fft: int = 128
    max_log_magnitude: float = 6.0

    @classmethod
    def from_dict(cls, values: dict) -> IstftHeadConfig:
        values = dict(values)
        values["resblock_dilations"] = tuple(values["resblock_dilations"])
        return cls(**values)

    def to_dict(self) -> dict:
        return asdict(self)


def _inverse_dft_basis(n_fft: int, hop: int) -> Tensor:
    """[2 * bins, 1, n_fft]: real and imaginary spectrum rows → the windowed frame they make,
    already divided by the squared Hann window's overlap-add sum (constant for hop ≤ n_fft / 4)."""
    bins = n_fft // 2 + 1
    n = torch.arange(n_fft, dtype=torch.float64)
    k = torch.arange(bins, dtype=torch.float64)[:, None]
    angle = 2 * math.pi * k * n / n_fft
    weight = torch.full((bins, 1), 2.0, dtype=torch.float64)
    weight[0] = weight[-1] = 1.0  # DC and Nyquist appear once in a real signal's spectrum
    window = torch.hann_window(n_fft, periodic=True, dtype=torch.float64)
    overlap = (window ** 2).sum() / hop
    real = weight * torch.cos(angle) * window / (n_fft * overlap)
    imag = -weight * torch.sin(angle) * window / (n_fft * overlap)
    return torch.cat([real, imag])[:, None, :].float()


class IstftHead(nn.Module):
    """Features [B, C, n] at hop-32 positions → audio [B, n * 32]; position t's frame is centred
    on samples t * 32 + 16 (where the HiFi-GAN puts them)."""

    def __init__(self, in_channels: int, hop: int, config: IstftHeadConfig) -> None:
        super().__init__()
        if config.n_fft % hop or config.n_fft < 4 * hop:
            raise ValueError(f"n_fft {config.n_fft} must be a multiple of the hop {hop}, at least 4x "
                             "(where the squared Hann window overlap-adds to a constant)")
        self.config = config
        self.hop = hop
        self.bins = config.n_fft // 2 + 1
        pad = config.kernel // 2
        self.conv_in = nn.Conv1d(in_channels, config.channels, config.kernel, padding=pad)
        self.block = _ResBlock(config.channels, 3, config.resblock_dilations)
        self.conv_out = nn.Conv1d(config.channels, 2 * self.bins, config.kernel, padding=pad)
        self.register_buffer("basis", _inverse_dft_basis(config.n_fft, hop), persistent=False)
        # Position t's frame spans [t * hop, t * hop + n_fft) of the overlap-add, centred at
        # t * hop + n_fft / 2; trimming n_fft / 2 - hop / 2 puts that centre at t * hop + hop / 2.
        self.trim = config.n_fft // 2 - hop // 2

    def forward(self, features: Tensor) -> Tensor:
        x = self.conv_in(F.leaky_relu(features, _SLOPE))
        x = self.conv_out(F.leaky_relu(self.block(x), _SLOPE))
        log_magnitude, phase = x.split(self.bins, dim=1)
        magnitude = torch.exp(log_magnitude.clamp(max=self.config.max_log_magnitude))
        spectrum = torch.cat([magnitude * torch.cos(phase), magnitude * torch.sin(phase)], dim=1)
        audio = F.conv_transpose1d(spectrum, self.basis, stride=self.hop)[:, 0]
        length = features.shape[-1] * self.hop
        return audio[:, self.trim : self.trim + length].clamp(-1.0, 1.0)


class HifiGanTrunk(nn.Module):
    """The teacher's conv_pre, first upsampling layer and its resblocks: z [B, 192, n] →
    features [B, 128, 8n]. Frozen: its weights are the voice package's."""

    def __init__(self, teacher: HifiGanDecoder) -> None:
        super().__init__()
        config = teacher.config
        kernels = len(config.resblock_kernels)
        self.conv_pre = teacher.conv_pre
        self.upsample = teacher.ups[0]
        self.resblocks = nn.ModuleList(teacher.resblocks[:kernels])
        self.out_channels = config.initial_channels // 2
        self.positions_per_frame = config.upsample_rates[0]
        self.requires_grad_(False)

    def forward(self, z: Tensor) -> Tensor:
        x = self.upsample(F.leaky_relu(self.conv_pre(z), _SLOPE))
        return sum(block(x) for block in self.resblocks) / len(self.resblocks)


class IstftDecoder(nn.Module):
    """z [B, 192, n] → audio [B, n * 256] in [-1, 1]: the frozen HiFi-GAN trunk + a trained
    iSTFT head. Invariant: frame i decodes to samples [i * 256, (i + 1) * 256)."""

    def __init__(self, trunk: HifiGanTrunk, head: IstftHead) -> None:
        super().__init__()
        self.trunk = trunk
        self.head = head

    @classmethod
    def build(cls, teacher: HifiGanDecoder, config: IstftHeadConfig | None = None) -> IstftDecoder:
        teacher_config: HifiGanConfig = teacher.config
        hop = teacher_config.hop_length // teacher_config.upsample_rates[0]
        trunk = HifiGanTrunk(teacher)
        return cls(trunk, IstftHead(trunk.out_channels, hop, config or IstftHeadConfig()))

    def forward(self, z: Tensor) -> Tensor:
        return self.head(self.trunk(z))


def save_head(head: IstftHead, folder: Path) -> Path:
    """float16 weights + their config; returns the weights file."""
    folder.mkdir(parents=True, exist_ok=True)
    state = {name: value.detach().to(torch.float16).contiguous() for name, value in head.state_dict().items()}
    path = folder / HEAD_WEIGHTS_FILE
    save_file(state, str(path))
    os.chmod(path, 0o644)  # shipped in the repo: readable like every other file there
    (folder / HEAD_CONFIG_FILE).write_text(json.dumps(head.config.to_dict(), indent=2) + "\n")
    return path


def load_decoder(teacher: HifiGanDecoder, folder: Path) -> IstftDecoder:
    config = IstftHeadConfig.from_dict(json.loads((folder / HEAD_CONFIG_FILE).read_text()))
    decoder = IstftDecoder.build(teacher, config)
    state = {name: value.float() for name, value in load_file(str(folder / HEAD_WEIGHTS_FILE)).items()}
    decoder.head.load_state_dict(state, strict=True)
    return decoder.eval()


def onnx_path(folder: Path, voice_key: str, kind: str = "istft") -> Path:
    """Where the decoder with the head in `folder` is cached as an ONNX graph of `kind` (the
    whole decoder, or its incremental form): the name changes with the head's weights and with
    the voice package (`voice_key`) its trunk comes from."""
    digest = hashlib.sha256((folder / HEAD_WEIGHTS_FILE).read_bytes()).hexdigest()[:16]
    return voice_cache("joe") / f"{kind}-{digest}-{voice_key}.onnx"


def export_onnx(decoder: IstftDecoder, target: Path) -> Path:
    """Writes the decoder to `target` as an ONNX graph, batch and length dynamic. On the CPU
    onnxruntime runs it ~1.5x faster than torch and without torch's occasional 100-200 ms stalls
    on window lengths it has not seen yet (measured on the 2-core machine)."""
    example = torch.zeros(1, decoder.trunk.conv_pre.in_channels, 16)
    dynamic = {ONNX_INPUT: {0: "batch", 2: "frames"}, ONNX_OUTPUT: {0: "batch", 1: "samples"}}

    def write(staging: str) -> None:
        with torch.no_grad():
            torch.onnx.export(decoder.eval(), (example,), staging, input_names=[ONNX_INPUT],
                              output_names=[ONNX_OUTPUT], dynamic_axes=dynamic, opset_version=17, dynamo=False)

    return write_aside(target, write)
