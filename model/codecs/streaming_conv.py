"""Stateful, exact streaming of "same"-padded 1-D convolution stacks.

A decoder made of convolutions with zero "same" padding, transposed-convolution upsamplers and
pointwise activations can run on a stream of frames piece by piece, each frame's work done once:
every layer keeps the last inputs its kernel still needs (its state) and computes only the outputs
whose whole receptive field has arrived. Each layer therefore lags its input by a fixed delay, and
outputs that fall outside the utterance (before position 0, or past its end once the end is known)
are zeroed, which is exactly the zero padding a whole-utterance decode would have seen there.

Positions are counted per stream at each layer's own rate; `Positions` says, for every stream of
a batch, where the piece computed now starts and where the utterance ends.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn import functional as F


class Positions:
    """Per stream of a batch, at one layer's rate: `start` [B] is the position of the first output
    computed now (negative while the layer still lags the utterance's start) and `end` [B] the
    utterance's length (OPEN while it may still grow). Tensors, so that a traced graph (ONNX)
    computes the masks too."""

    OPEN = 2**40  # "no end yet": beyond any position at any rate (x 256 still fits int64)

    def __init__(self, start: Tensor, end: Tensor) -> None:
        self.start, self.end = start, end

    def shifted(self, delay: int) -> Positions:
        return Positions(self.start - delay, self.end)

    def scaled(self, rate: int, offset: int) -> Positions:
        """The positions `rate` times finer, starting `offset` later (an upsampler's output)."""
        return Positions(self.start * rate + offset, self.end * rate)

    def apply(self, x: Tensor) -> Tensor:
        """x [B, C, n] with the positions outside the utterance zeroed (the zero padding a
        whole-utterance decode sees there)."""
        position = self.start[:, None] + torch.arange(x.shape[-1], device=x.device)[None, :]
        inside = (position >= 0) & (position < self.end[:, None])
        return x * inside[:, None, :].to(x.dtype)


class StreamingConv:
    """One "same" nn.Conv1d (odd kernel, padding (kernel - 1) * dilation / 2) on a stream. State:
    its last (kernel - 1) * dilation inputs. Outputs lag inputs by `delay`; with `residual` the
    layer computes x + conv(act(x)) (act: leaky ReLU of `slope`), its state holding raw x."""

    def __init__(self, conv: nn.Conv1d, slope: float | None = None, residual: bool = False) -> None:
        (kernel,), (dilation,) = conv.kernel_size, conv.dilation
        if kernel % 2 == 0 or conv.padding != ((kernel - 1) * dilation // 2,) or conv.stride != (1,):
            raise ValueError("a streaming convolution must be a stride-1 'same' convolution with an odd kernel")
        self.conv = conv
        self.slope = slope
        self.residual = residual
        self.span = (kernel - 1) * dilation
        self.delay = self.span // 2
        self.channels = conv.in_channels

    @property
    def dtype(self) -> torch.dtype:
        return self.conv.weight.dtype

    def __call__(self, x: Tensor, state: Tensor) -> tuple[Tensor, Tensor]:
        joined = torch.cat([state, x.to(self.dtype)], dim=-1)
        inputs = joined if self.slope is None else F.leaky_relu(joined, self.slope)
        y = F.conv1d(inputs, self.conv.weight, self.conv.bias, dilation=self.conv.dilation)
        if self.residual:
            y = y + joined[..., self.delay : self.delay + x.shape[-1]]
        return y, joined[..., x.shape[-1]:]


class StreamingUpsample:
    """A transposed convolution (weight [C_in, C_out, kernel], stride, cropped by (kernel -
    stride) / 2 at each end, as nn.ConvTranspose1d's padding does) on a stream, after a leaky ReLU
    of `slope` (None: none). State: the last (kernel - stride) / stride activated inputs. For n
    inputs starting at position i0 it returns the stride * n outputs starting at
    stride * i0 - padding."""

    def __init__(self, weight: Tensor, bias: Tensor | None, stride: int, slope: float | None) -> None:
        kernel = weight.shape[-1]
        if (kernel - stride) % 2 or (kernel - stride) % stride:
            raise ValueError(f"kernel {kernel} - stride {stride} must be an even multiple of the stride")
        self.weight, self.bias = weight, bias
        self.slope = slope
        self.stride = stride
        self.padding = (kernel - stride) // 2
        self.history = (kernel - stride) // stride  # earlier inputs an output still depends on
        self.channels = weight.shape[0]

    @classmethod
    def of(cls, up: nn.ConvTranspose1d, slope: float | None) -> StreamingUpsample:
        (kernel,), (stride,), (padding,) = up.kernel_size, up.stride, up.padding
        if padding != (kernel - stride) // 2:
            raise ValueError("a streaming upsampler needs (kernel - stride) / 2 padding")
        return cls(up.weight, up.bias, stride, slope)

    @property
    def dtype(self) -> torch.dtype:
        return self.weight.dtype

    def __call__(self, x: Tensor, state: Tensor) -> tuple[Tensor, Tensor]:
        x = x.to(self.dtype)
        x = x if self.slope is None else F.leaky_relu(x, self.slope)
        joined = torch.cat([state, x], dim=-1)  # [B, C_in, h + n]
        # NOTE: a matmul and h + 1 shifted adds, not F.conv_transpose1d: PyTorch's took 4 ms a
        # call here on the CPU (no oneDNN path for these shapes), and onnxruntime's ConvTranspose
        # 40 % more than this. The weight maps each input to its kernel's taps; taps k * stride
        # + j land in output block (input + k), and output block h + i (i < n) has every
        # contribution it will ever get.
        batch, _, length = joined.shape
        n, out_channels = x.shape[-1], self.weight.shape[1]
        taps = torch.einsum("bcl,cok->bokl", joined, self.weight)  # [B, C_out, kernel, h + n]
        taps = taps.reshape(batch, out_channels, self.history + 1, self.stride, length)
        blocks = sum(taps[:, :, k, :, self.history - k : self.history - k + n] for k in range(self.history + 1))
        y = blocks.transpose(2, 3).reshape(batch, out_channels, n * self.stride)  # [B, C_out, n * stride]
        if self.bias is not None:
            y = y + self.bias[:, None]
        return y, joined[..., n:]


class Delay:
    """A delay line of `length` positions (to align parallel branches of different lags)."""

    def __init__(self, channels: int, length: int, dtype: torch.dtype) -> None:
        self.channels = channels
        self.span = length
        self.dtype = dtype

    def __call__(self, x: Tensor, state: Tensor) -> tuple[Tensor, Tensor]:
        joined = torch.cat([state, x.to(self.dtype)], dim=-1)
        return joined[..., : x.shape[-1]], joined[..., x.shape[-1]:]
