"""Building blocks of the SNAC codec, named so that parameter paths match SNAC's checkpoints.

Every convolution here holds a plain `weight`: SNAC stores weight-normalised weights, which the
loader folds into plain ones once (snac.py), so inference never recomputes the normalisation.
"""
from __future__ import annotations

import math
from typing import Sequence

import torch
from torch import Tensor, nn
from torch.nn import functional as F


class Snake1d(nn.Module):
    """x + sin²(αx) / α with one learned α per channel, stored as [1, C, 1] like SNAC's."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.alpha = nn.Parameter(torch.ones(1, channels, 1))

    def forward(self, x: Tensor) -> Tensor:
        # NOTE: the 1e-9 keeps a zero α finite, as in the trained model.
        return x + (self.alpha + 1e-9).reciprocal() * torch.sin(self.alpha * x).pow(2)


class Stack(nn.Module):
    """Runs its layers in order. SNAC nests each sequence under an attribute (`block` or
    `model`), so that name is a parameter: checkpoint keys then map onto ours one to one."""

    def __init__(self, layers: Sequence[nn.Module], attribute: str = "block") -> None:
        super().__init__()
        self._attribute = attribute
        self.add_module(attribute, nn.Sequential(*layers))

    def forward(self, x: Tensor) -> Tensor:
        return getattr(self, self._attribute)(x)


class ResidualUnit(nn.Module):
    """x + f(x) where f (snake, dilated kernel-7 conv, snake, 1×1 conv) keeps the length of x:
    the dilated conv is padded by 3·dilation on both sides."""

    def __init__(self, dim: int, dilation: int, groups: int) -> None:
        super().__init__()
        self.block = nn.Sequential(
            Snake1d(dim),
            nn.Conv1d(dim, dim, 7, dilation=dilation, padding=3 * dilation, groups=groups),
            Snake1d(dim),
            nn.Conv1d(dim, dim, 1),
        )

    def forward(self, x: Tensor) -> Tensor:
        return x + self.block(x)


class NoiseBlock(nn.Module):
    """Adds n · linear(x) with n ~ N(0, 1) drawn per batch item and time step (shared by all
    channels) when `enabled`; the identity otherwise, which makes decoding deterministic."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.linear = nn.Conv1d(dim, dim, 1, bias=False)
        self.enabled = True

    def forward(self, x: Tensor) -> Tensor:
        if not self.enabled:
            return x
        batch, _, length = x.shape
        noise = torch.randn((batch, 1, length), device=x.device, dtype=x.dtype)
        return x + noise * self.linear(x)


class CodebookLevel(nn.Module):
    """One residual level: codes [B, n] → latent contribution [B, latent, n·stride], each code's
    projected codebook vector held for `stride` latent steps."""

    def __init__(self, latent_dim: int, codebook_size: int, codebook_dim: int, stride: int) -> None:
        super().__init__()
        self.stride = stride
        self.codebook = nn.Embedding(codebook_size, codebook_dim)
        self.out_proj = nn.Conv1d(codebook_dim, latent_dim, 1)

    def forward(self, codes: Tensor) -> Tensor:
        vectors = F.embedding(codes, self.codebook.weight).transpose(1, 2)
        return self.out_proj(vectors).repeat_interleave(self.stride, dim=-1)


class ResidualCodebooks(nn.Module):
    """The decoding half of SNAC's residual quantizer: the latent is the sum of every level's
    contribution, so level i must hold n_latent / stride_i codes."""

    def __init__(
        self, latent_dim: int, codebook_size: int, codebook_dim: int, strides: Sequence[int]
    ) -> None:
        super().__init__()
        self.quantizers = nn.ModuleList(
            CodebookLevel(latent_dim, codebook_size, codebook_dim, stride) for stride in strides
        )

    def forward(self, codes: Sequence[Tensor]) -> Tensor:
        latent = self.quantizers[0](codes[0])
        for level, level_codes in zip(self.quantizers[1:], codes[1:]):
            latent = latent + level(level_codes)
        return latent


def upsampling_block(
    in_dim: int, out_dim: int, stride: int, noise: bool, groups: int
) -> Stack:
    # The padding makes the transposed conv turn n steps into exactly n·stride.
    layers: list[nn.Module] = [
        Snake1d(in_dim),
        nn.ConvTranspose1d(
            in_dim,
            out_dim,
            2 * stride,
            stride=stride,
            padding=math.ceil(stride / 2),
            output_padding=stride % 2,
        ),
    ]
    if noise:
        layers.append(NoiseBlock(out_dim))
    layers += [ResidualUnit(out_dim, dilation, groups) for dilation in (1, 3, 9)]
    return Stack(layers)


def encoder_layout(dim: int, rates: Sequence[int], depthwise: bool) -> Stack:
    """SNAC's encoder, only to give a written checkpoint every key SNAC expects: never run."""
    layers: list[nn.Module] = [nn.Conv1d(1, dim, 7, padding=3)]
    for stride in rates:
        groups = dim if depthwise else 1
        layers.append(
            Stack(
                [ResidualUnit(dim, dilation, groups) for dilation in (1, 3, 9)]
                + [
                    Snake1d(dim),
                    nn.Conv1d(
                        dim, 2 * dim, 2 * stride, stride=stride, padding=math.ceil(stride / 2)
                    ),
                ]
            )
        )
        dim *= 2
    layers.append(nn.Conv1d(dim, dim, 7, padding=3, groups=dim if depthwise else 1))
    return Stack(layers)
