"""Stateful, exact streaming of 1-D convolution stacks, "same"-padded or causal.

A decoder made of convolutions with zero padding, transposed-convolution upsamplers and pointwise
activations can run on a stream of frames piece by piece, each frame's work done once: every layer
keeps the last inputs its kernel still needs (its state) and computes only the outputs whose whole
receptive field has arrived. Each layer therefore lags its input by a fixed delay (its padding on
the right: half its span when "same"-padded, none when causal), and outputs that fall outside the
utterance (before position 0, or past its end once the end is known) are zeroed, which is exactly
the zero padding a whole-utterance decode would have seen there. A stack of causal layers needs
no masks: none lags, and their zero initial states are the left padding.

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
    """One stride-1 nn.Conv1d on a stream: a "same" one (odd kernel, padding (kernel - 1) *
    dilation / 2), or with `causal` an unpadded one whose whole decode pads (kernel - 1) *
    dilation zeros on the left only. State: its last (kernel - 1) * dilation inputs. Outputs lag
    inputs by `delay` (0 when causal); with `residual` the layer computes x + conv(act(x)) (act:
    leaky ReLU of `slope`), its state holding raw x."""

    def __init__(self, conv: nn.Conv1d, slope: float | None = None, residual: bool = False,
                 causal: bool = False) -> None:
        (kernel,), (dilation,) = conv.kernel_size, conv.dilation
        if conv.stride != (1,):
            raise ValueError("a streaming convolution must have stride 1")
        if causal and conv.padding != (0,):
            raise ValueError("a causal streaming convolution must be unpadded (its state is the left padding)")
        if not causal and (kernel % 2 == 0 or conv.padding != ((kernel - 1) * dilation // 2,)):
            raise ValueError("a streaming convolution must be a stride-1 'same' convolution with an odd kernel")
        self.conv = conv
        self.slope = slope
        self.residual = residual
        self.span = (kernel - 1) * dilation
        self.delay = 0 if causal else self.span // 2
        self.channels = conv.in_channels
        self.state_length = self.span

    @property
    def dtype(self) -> torch.dtype:
        return self.conv.weight.dtype

    def __call__(self, x: Tensor, state: Tensor) -> tuple[Tensor, Tensor]:
        joined = torch.cat([state, x.to(self.dtype)], dim=-1)
        inputs = joined if self.slope is None else F.leaky_relu(joined, self.slope)
        y = F.conv1d(inputs, self.conv.weight, self.conv.bias, dilation=self.conv.dilation, groups=self.conv.groups)
        if self.residual:
            # Output i is at input position (first fed) - delay + i, which `joined` holds at span - delay + i.
            aligned = self.span - self.delay
            y = y + joined[..., aligned : aligned + x.shape[-1]]
        return y, _state_of(joined, x.shape[-1])


class StreamingUpsample:
    """A transposed convolution (weight [C_in, C_out, kernel], stride) on a stream, after a leaky
    ReLU of `slope` (None: none), its full output cropped by (kernel - stride) / 2 at each end (as
    nn.ConvTranspose1d's padding does) or, with `causal`, by kernel - stride at the right end
    only. State: the last (kernel - stride) / stride activated inputs. For n inputs starting at
    position i0 it returns the stride * n outputs starting at stride * i0 - padding (the left
    crop: 0 when causal)."""

    def __init__(self, weight: Tensor, bias: Tensor | None, stride: int, slope: float | None,
                 causal: bool = False) -> None:
        kernel = weight.shape[-1]
        if (kernel - stride) % stride or (not causal and (kernel - stride) % 2):
            raise ValueError(f"kernel {kernel} - stride {stride} must be a multiple of the stride "
                             "(and even unless causal)")
        self.weight, self.bias = weight, bias
        self.slope = slope
        self.stride = stride
        self.padding = 0 if causal else (kernel - stride) // 2
        self.history = (kernel - stride) // stride  # earlier inputs an output still depends on
        self.channels = weight.shape[0]
        self.state_length = self.history
        # [C_out * stride, C_in, h + 1]: row o * stride + j, tap t = weight[:, o, (h - t) * stride + j]
        taps = weight.detach().reshape(weight.shape[0], weight.shape[1], self.history + 1, stride).flip(2)
        # Contiguous once here: a strided view would be copied by every call's convolution.
        polyphase = taps.permute(1, 3, 0, 2).reshape(weight.shape[1] * stride, weight.shape[0], self.history + 1)
        self.polyphase = polyphase.contiguous()

    @classmethod
    def of(cls, up: nn.ConvTranspose1d, slope: float | None, causal: bool = False) -> StreamingUpsample:
        """`up` streamed; with `causal`, `up` is unpadded and its whole decode crops the right end."""
        (kernel,), (stride,), (padding,) = up.kernel_size, up.stride, up.padding
        if padding != (0 if causal else (kernel - stride) // 2):
            raise ValueError("a streaming upsampler needs (kernel - stride) / 2 padding, or none when causal")
        return cls(up.weight, up.bias, stride, slope, causal)

    @property
    def dtype(self) -> torch.dtype:
        return self.weight.dtype

    def __call__(self, x: Tensor, state: Tensor) -> tuple[Tensor, Tensor]:
        x = x.to(self.dtype)
        x = x if self.slope is None else F.leaky_relu(x, self.slope)
        joined = torch.cat([state, x], dim=-1)  # [B, C_in, h + n]
        # NOTE: the transposed convolution in its polyphase form, one ordinary convolution: output
        # block h + i (its `stride` samples, i < n) has every contribution it will ever get, from
        # inputs i .. i + h, and sample j of it takes tap (h - t) * stride + j of input i + t.
        # F.conv_transpose1d was 4 ms a call here in PyTorch (no oneDNN path for these shapes).
        batch, n = x.shape[0], x.shape[-1]
        y = F.conv1d(joined, self.polyphase)  # [B, C_out * stride, n]
        y = y.view(batch, -1, self.stride, n).transpose(2, 3).reshape(batch, -1, n * self.stride)
        if self.bias is not None:
            y = y + self.bias[:, None]
        return y, _state_of(joined, n)


class Delay:
    """A delay line of `length` positions (to align parallel branches of different lags)."""

    def __init__(self, channels: int, length: int, dtype: torch.dtype) -> None:
        self.channels = channels
        self.span = length
        self.state_length = length
        self.dtype = dtype

    def __call__(self, x: Tensor, state: Tensor) -> tuple[Tensor, Tensor]:
        joined = torch.cat([state, x.to(self.dtype)], dim=-1)
        return joined[..., : x.shape[-1]], _state_of(joined, x.shape[-1])


def _state_of(joined: Tensor, fed: int) -> Tensor:
    """The state after a step: `joined`'s last positions, copied. A view would keep all of
    `joined` (the state and every input fed) alive for as long as the state, in every layer at
    once until the step returns (hundreds of MiB a stream for a long feed of a large codec)."""
    return joined[..., fed:].clone()
