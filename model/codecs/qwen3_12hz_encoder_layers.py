"""Building blocks of the 12 Hz codec encoder (Mimi's): the SEANet encoder, the downsampling
convolution and the split residual quantizer's search, named so that parameter paths match the
reference's state dict (less `encoder.` and the codebook folds the loader makes).

Every convolution is causal with Mimi's padding rule: (kernel - 1) * dilation + 1 - stride
samples on the left, then on the right as many as make the length a multiple of the stride. So
n inputs give ceil(n / stride) outputs, and output t depends on inputs before (t + 1) * stride.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from model.codecs.qwen3_12hz_config import Qwen3EncoderConfig


class MimiConv(nn.Module):
    """A `conv` (nn.Conv1d, unpadded) run after Mimi's causal padding: zeros, or with `replicate`
    copies of the edge samples (the downsampling convolution's)."""

    def __init__(self, in_channels: int, out_channels: int, kernel: int, stride: int = 1, dilation: int = 1,
                 bias: bool = True, replicate: bool = False) -> None:
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel, stride=stride, dilation=dilation, bias=bias)
        self.left = (kernel - 1) * dilation + 1 - stride
        self.mode = "replicate" if replicate else "constant"

    def forward(self, x: Tensor) -> Tensor:
        stride = self.conv.stride[0]
        return self.conv(F.pad(x, (self.left, -x.shape[-1] % stride), mode=self.mode))


class SeanetResidual(nn.Module):
    """x + conv(elu(conv(elu(x)))): a dilated `kernel` conv to `hidden` channels, then a pointwise
    one back (`block` holds the four steps, the activations too, so that indices match)."""

    def __init__(self, dim: int, hidden: int, kernel: int, dilation: int) -> None:
        super().__init__()
        self.block = nn.ModuleList([nn.ELU(), MimiConv(dim, hidden, kernel, dilation=dilation),
                                    nn.ELU(), MimiConv(hidden, dim, 1)])

    def forward(self, x: Tensor) -> Tensor:
        h = x
        for layer in self.block:
            h = layer(h)
        return x + h


class SeanetEncoder(nn.Module):
    """Audio [B, 1, n] → [B, hidden, ceil(n / conv_hop)]: a conv to num_filters channels, then per
    ratio (Mimi lists them decoder first, so the encoder takes them reversed) residual blocks and
    an ELU before a strided conv doubling the channels, then an ELU and a conv to hidden_size."""

    def __init__(self, config: Qwen3EncoderConfig) -> None:
        super().__init__()
        width = config.num_filters
        layers: list[nn.Module] = [MimiConv(1, width, config.kernel_size)]
        for ratio in reversed(config.upsampling_ratios):
            layers += [SeanetResidual(width, width // config.compress, config.residual_kernel_size,
                                      config.dilation_growth_rate ** j) for j in range(config.num_residual_layers)]
            layers += [nn.ELU(), MimiConv(width, 2 * width, 2 * ratio, stride=ratio)]
            width *= 2
        layers += [nn.ELU(), MimiConv(width, config.hidden_size, config.last_kernel_size)]
        self.layers = nn.ModuleList(layers)

    def forward(self, x: Tensor) -> Tensor:
        for layer in self.layers:
            x = layer(x)
        return x


def downsampler(config: Qwen3EncoderConfig) -> MimiConv:
    """The conv that halves the transformer's rate to the frame rate (no bias, edges replicated)."""
    return MimiConv(config.hidden_size, config.hidden_size, config.downsample_kernel, stride=2, bias=False,
                    replicate=True)


class CodebookSearch(nn.Module):
    """One residual vector quantizer's encoding: the input projected (pointwise, no bias; none
    when it is already codebook-wide), then code i = the nearest (Euclidean) vector of codebook i
    to what codebooks < i left of it. `codebooks` [used, size, dim] holds Mimi's embed_sum /
    clamped cluster_usage of its first `used` codebooks, folded at load."""

    def __init__(self, hidden: int, dim: int, size: int, used: int) -> None:
        super().__init__()
        self.input_proj = nn.Conv1d(hidden, dim, 1, bias=False) if hidden != dim else None
        self.codebooks = nn.Parameter(torch.zeros(used, size, dim))

    def forward(self, x: Tensor) -> Tensor:
        """x [B, hidden, n] → codes [B, used, n] (int64)."""
        projected = x if self.input_proj is None else self.input_proj(x)
        batch, _, n = projected.shape
        residual = projected.transpose(1, 2).reshape(batch * n, -1)
        codes = []
        for book in self.codebooks:
            # NOTE: torch.cdist as the reference calls it (its matmul form for these sizes): a
            # nearer-looking formula could round differently and pick the other of two near ties.
            nearest = torch.cdist(residual[None], book[None])[0].argmin(dim=-1)
            residual = residual - book[nearest]
            codes.append(nearest)
        return torch.stack(codes, dim=1).view(batch, n, -1).transpose(1, 2)


class SplitCodebookSearch(nn.Module):
    """Codes of a frame: the semantic quantizer's (its own projection of the input), then the
    acoustic quantizer's first `valid_quantizers - num_semantic_quantizers` (their own projection
    of the same input, not of the semantic residual)."""

    def __init__(self, config: Qwen3EncoderConfig) -> None:
        super().__init__()
        shape = config.hidden_size, config.codebook_dim, config.codebook_size
        semantic = config.num_semantic_quantizers
        self.semantic_residual_vector_quantizer = CodebookSearch(*shape, semantic)
        self.acoustic_residual_vector_quantizer = CodebookSearch(*shape, config.valid_quantizers - semantic)

    def forward(self, x: Tensor) -> Tensor:
        """x [B, hidden, n] → codes [B, valid_quantizers, n]."""
        return torch.cat([self.semantic_residual_vector_quantizer(x), self.acoustic_residual_vector_quantizer(x)],
                         dim=1)
