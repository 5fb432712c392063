"""Our PyTorch port of the voice's HiFi-GAN decoder (VITS `dec`): latent z → waveform."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.nn import functional as F

# LeakyReLU slopes of the VITS generator: 0.1 inside, PyTorch's default 0.01 before conv_post.
_SLOPE = 0.1
_FINAL_SLOPE = 0.01


@dataclass(slots=True)
class HifiGanConfig:
    """The generator's shape; defaults are the joe voice's (1.66 M parameters, hop 256).
    Invariant: every upsampling layer maps n frames to exactly n * rate samples."""

    latent_channels: int = 192
    initial_channels: int = 256
    upsample_rates: tuple[int, ...] = (8, 8, 4)
    upsample_kernels: tuple[int, ...] = (16, 16, 8)
    resblock_kernels: tuple[int, ...] = (3, 5, 7)
    resblock_dilations: tuple[tuple[int, ...], ...] = ((1, 2), (2, 6), (3, 12))
    sample_rate: int = 22050

    def __post_init__(self) -> None:
        if len(self.upsample_rates) != len(self.upsample_kernels) or not self.upsample_rates:
            raise ValueError("upsample_rates and upsample_kernels must be non-empty and match")
        for rate, kernel in zip(self.upsample_rates, self.upsample_kernels):
            if rate < 1 or kernel < rate or (kernel - rate) % 2:
                raise ValueError(f"kernel {kernel} must be >= rate {rate} with an even difference")
        if len(self.resblock_kernels) != len(self.resblock_dilations):
            raise ValueError("resblock_kernels and resblock_dilations must match")
        if any(k % 2 == 0 for k in self.resblock_kernels):
            raise ValueError("resblock kernels must be odd (same-length convolutions)")
        if self.initial_channels % 2 ** len(self.upsample_rates):
            raise ValueError("initial_channels must halve cleanly at every upsampling layer")

    @property
    def hop_length(self) -> int:
        return math.prod(self.upsample_rates)


class _ResBlock(nn.Module):
    """x ← x + conv_d(leaky(x)) for each dilation d; the length never changes."""

    def __init__(self, channels: int, kernel: int, dilations: tuple[int, ...]) -> None:
        super().__init__()
        self.convs = nn.ModuleList(
            nn.Conv1d(channels, channels, kernel, dilation=d, padding=d * (kernel - 1) // 2)
            for d in dilations
        )

    def forward(self, x: Tensor) -> Tensor:
        for conv in self.convs:
            x = x + conv(F.leaky_relu(x, _SLOPE))
        return x


class HifiGanDecoder(nn.Module):
    """z [B, latent_channels, n] → audio [B, n * hop_length] in [-1, 1]; parameter names match
    the voice's `dec.*` initializers so its weights load with a strict state dict."""

    def __init__(self, config: HifiGanConfig) -> None:
        super().__init__()
        self.config = config
        width = config.initial_channels
        self.conv_pre = nn.Conv1d(config.latent_channels, width, 7, padding=3)
        self.ups = nn.ModuleList()
        self.resblocks = nn.ModuleList()
        for rate, kernel in zip(config.upsample_rates, config.upsample_kernels):
            self.ups.append(
                nn.ConvTranspose1d(width, width // 2, kernel, rate, padding=(kernel - rate) // 2)
            )
            width //= 2
            self.resblocks.extend(
                _ResBlock(width, k, d)
                for k, d in zip(config.resblock_kernels, config.resblock_dilations)
            )
        self.conv_post = nn.Conv1d(width, 1, 7, padding=3, bias=False)

    @classmethod
    def from_state_dict(
        cls, state: dict[str, Tensor], config: HifiGanConfig | None = None
    ) -> HifiGanDecoder:
        decoder = cls(config or HifiGanConfig())
        decoder.load_state_dict(state, strict=True)
        return decoder.eval()

    def forward(self, z: Tensor) -> Tensor:
        kernels = len(self.config.resblock_kernels)
        x = self.conv_pre(z)
        for index, upsample in enumerate(self.ups):
            x = upsample(F.leaky_relu(x, _SLOPE))
            blocks = self.resblocks[index * kernels : (index + 1) * kernels]
            x = sum(block(x) for block in blocks) / kernels
        x = self.conv_post(F.leaky_relu(x, _FINAL_SLOPE))
        return torch.tanh(x)[:, 0]
