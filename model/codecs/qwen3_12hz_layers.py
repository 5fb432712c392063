"""Building blocks of the 12 Hz codec decoder, named so that parameter paths match the
reference's state dict (less the `decoder.` prefix and the folds the loader makes).

The convolutions are causal: a whole decode pads each on the left only. They are held here
unpadded, as plain parameter containers; model/codecs/streaming_conv.py runs them with their left
context as a state (qwen3_12hz_stream.py), which a whole decode starts at zero. The blocks' own
methods are the pointwise parts between them.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn import functional as F


class SnakeBeta(nn.Module):
    """x + sin²(x·e^α) / (e^β + 1e-9), α and β per channel (stored as logarithms), x [B, C, n]."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.alpha = nn.Parameter(torch.zeros(channels))
        self.beta = nn.Parameter(torch.zeros(channels))

    def forward(self, x: Tensor) -> Tensor:
        frequency, magnitude = self.alpha.exp()[:, None], self.beta.exp()[:, None]
        return x + (1.0 / (magnitude + 1e-9)) * torch.sin(x * frequency).pow(2)


class CausalConv(nn.Module):
    """Holds an unpadded stride-1 `conv`: the decoder applies it after (kernel - 1) * dilation
    zeros of left padding, so output t depends on inputs up to t only."""

    def __init__(self, in_channels: int, out_channels: int, kernel: int, dilation: int = 1, groups: int = 1) -> None:
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel, dilation=dilation, groups=groups)


class CausalUpsample(nn.Module):
    """Holds an unpadded transposed `conv` (kernel a multiple of its stride): the decoder crops
    kernel - stride samples off the right end, so n inputs give stride * n outputs and output
    block t depends on inputs up to t only."""

    def __init__(self, in_channels: int, out_channels: int, kernel: int, stride: int) -> None:
        super().__init__()
        self.conv = nn.ConvTranspose1d(in_channels, out_channels, kernel, stride=stride)


class ConvNeXtBlock(nn.Module):
    """x + mix(dwconv(x)): a causal depthwise kernel-7 conv, then per position LayerNorm, a 4x
    GELU MLP and a learned per-channel scale."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dwconv = CausalConv(dim, dim, 7, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.pwconv1 = nn.Linear(dim, 4 * dim)
        self.pwconv2 = nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(torch.ones(dim))

    def mix(self, x: Tensor) -> Tensor:
        """The block's per-position part, x [B, C, n] (the depthwise conv's output)."""
        h = self.pwconv2(F.gelu(self.pwconv1(self.norm(x.transpose(1, 2)))))
        return (self.gamma * h).transpose(1, 2)


class ResidualUnit(nn.Module):
    """x + conv2(act2(conv1(act1(x)))): conv1 causal, kernel 7, dilated; conv2 pointwise."""

    def __init__(self, dim: int, dilation: int) -> None:
        super().__init__()
        self.act1 = SnakeBeta(dim)
        self.conv1 = CausalConv(dim, dim, 7, dilation=dilation)
        self.act2 = SnakeBeta(dim)
        self.conv2 = CausalConv(dim, dim, 1)


class DecoderBlock(nn.Module):
    """`block`: SnakeBeta, a causal transposed conv upsampling by `rate` (kernel 2 * rate) to
    half the channels, and residual units of dilation 1, 3 and 9."""

    DILATIONS = (1, 3, 9)

    def __init__(self, in_dim: int, out_dim: int, rate: int) -> None:
        super().__init__()
        self.block = nn.ModuleList([SnakeBeta(in_dim), CausalUpsample(in_dim, out_dim, 2 * rate, rate),
                                    *(ResidualUnit(out_dim, d) for d in self.DILATIONS)])


class ResidualCodebooks(nn.Module):
    """Codebooks whose vectors (`embeddings` [books, size, dim]: the reference's embedding_sum /
    clamped cluster_usage, folded at load) are summed over the books, then projected by the
    pointwise `output_proj` (no bias)."""

    def __init__(self, books: int, size: int, dim: int, out_dim: int) -> None:
        super().__init__()
        self.embeddings = nn.Parameter(torch.zeros(books, size, dim))
        self.output_proj = nn.Conv1d(dim, out_dim, 1, bias=False)

    def forward(self, codes: Tensor) -> Tensor:
        """codes [B, n, books] → [B, out_dim, n]."""
        books = torch.arange(codes.shape[-1], device=codes.device)
        summed = self.embeddings[books, codes].sum(dim=2)  # [B, n, dim]
        return self.output_proj(summed.transpose(1, 2))


class SplitQuantizer(nn.Module):
    """Dequantization: the semantic codebook (code 0) and the acoustic ones (codes 1..) each
    decoded by their own ResidualCodebooks, the two results added."""

    def __init__(self, quantizers: int, size: int, dim: int) -> None:
        super().__init__()
        self.rvq_first = ResidualCodebooks(1, size, dim // 2, dim)
        self.rvq_rest = ResidualCodebooks(quantizers - 1, size, dim // 2, dim)

    def forward(self, codes: Tensor) -> Tensor:
        """codes [B, n, quantizers] → [B, dim, n]."""
        return self.rvq_first(codes[..., :1]) + self.rvq_rest(codes[..., 1:])
