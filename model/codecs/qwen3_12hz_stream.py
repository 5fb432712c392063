"""The 12 Hz codec decoder run on streams of frames: each frame decoded once, exactly as a whole
decode, streams of different histories batched together.

Every layer of the decoder is causal (convolutions padded on the left only, transposed
convolutions cropped on the right only, attention over the past), so no output ever waits for a
later frame: the decoder has no lag, and the audio of a frame is final as soon as the frame is fed.
A stream's state is a fixed set of tensors (`state_shapes`): each attention layer's keys and
values of the last sliding_window - 1 positions, and each convolution's last (kernel - 1) *
dilation inputs (a transposed convolution's last input). Zero states are a stream before its first
frame: the zero padding of a whole decode, and an attention window whose positions all lie before
the stream began (masked by position, so stale contents would not matter either).
"""
from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor, nn

from model.codecs.qwen3_12hz_weights import Qwen3CodecDecoder
from model.codecs.streaming_conv import StreamingConv, StreamingUpsample

Layer = StreamingConv | StreamingUpsample


class StreamedQwen3Decoder(nn.Module):
    """forward(codes [B, n, quantizers], frames_before [B], keys, values, *conv_states) →
    (audio [B, n * samples_per_frame], keys', values', *conv_states'), every state batched
    [B, *shape] as `state_shapes` lists them. Invariant: for a stream fed frames [0, c) before
    and n now, the audio is samples [c * spf, (c + n) * spf) of the whole decode of its frames,
    and its states depend on its own frames only. Build it once the decoder is on its device:
    the upsamplers keep their weights in polyphase form."""

    def __init__(self, decoder: Qwen3CodecDecoder) -> None:
        super().__init__()
        self.decoder = decoder.eval().requires_grad_(False)
        self.pre_conv = StreamingConv(decoder.pre_conv.conv, causal=True)
        self.upsample = [(StreamingUpsample.of(up.conv, None, causal=True),
                          StreamingConv(block.dwconv.conv, causal=True)) for up, block in decoder.upsample]
        first, *blocks, _, last = decoder.decoder
        self.first_conv = StreamingConv(first.conv, causal=True)
        self.blocks = [(StreamingUpsample.of(block.block[1].conv, None, causal=True),
                        [StreamingConv(unit.conv1.conv, causal=True) for unit in block.block[2:]]) for block in blocks]
        self.last_conv = StreamingConv(last.conv, causal=True)
        layers: list[Layer] = [self.pre_conv, *(layer for stage in self.upsample for layer in stage), self.first_conv]
        for up, convs in self.blocks:
            layers += [up, *convs]
        # Stateless layers (a transposed conv whose kernel is its stride, a pointwise conv) hold no state.
        self.stateful = [layer for layer in [*layers, self.last_conv] if layer.state_length]

    def state_shapes(self) -> list[tuple[tuple[int, ...], torch.dtype]]:
        """One stream's state, (shape, dtype) per tensor: keys, values, then each convolution's
        [channels, history] in the order the decoder runs them."""
        dtype = self.decoder.pre_conv.conv.weight.dtype
        window = self.decoder.pre_transformer.window_shape()
        convs = [((layer.channels, layer.state_length), dtype) for layer in self.stateful]
        return [(window, dtype), (window, dtype), *convs]

    def forward(self, codes: Tensor, frames_before: Tensor, keys: Tensor, values: Tensor,
                *conv_states: Tensor) -> tuple[Tensor, ...]:
        if not codes.shape[1]:  # no frames: no audio (a zero-length pointwise conv would refuse)
            return (codes.new_zeros(codes.shape[0], 0, dtype=keys.dtype), keys, values, *conv_states)
        given = iter(conv_states)
        new: list[Tensor] = []

        def run(layer: Layer, x: Tensor) -> Tensor:
            if not layer.state_length:
                return layer(x, x.new_zeros(x.shape[0], layer.channels, 0))[0]
            y, state = layer(x, next(given))
            new.append(state)
            return y

        decoder = self.decoder
        x = run(self.pre_conv, decoder.quantizer(codes))
        x, keys, values = decoder.pre_transformer(x.transpose(1, 2), frames_before, keys, values)
        x = x.transpose(1, 2)
        for (up, dwconv), (_, block) in zip(self.upsample, decoder.upsample):
            x = run(up, x)
            x = x + block.mix(run(dwconv, x))
        x = run(self.first_conv, x)
        for (up, convs), block in zip(self.blocks, decoder.decoder[1:-2]):
            snake, _, *units = block.block
            x = run(up, snake(x))
            for conv, unit in zip(convs, units):
                x = x + unit.conv2.conv(unit.act2(run(conv, unit.act1(x))))
        audio = run(self.last_conv, decoder.decoder[-2](x)).clamp(-1.0, 1.0)
        return (audio[:, 0], keys, values, *new)


class Qwen3IncrementalDecoder:
    """The IncrementalDecoder (model/codecs/base.py) of the 12 Hz codec, run by PyTorch on the
    decoder's device; a stream's state is the list of tensors `state_shapes` describes (for a
    slot pool: [slots, *shape] each, gathered into `step`'s batched states by slot index)."""

    # Nothing is decoded ahead of a frame: no flush is ever needed, `totals` changes nothing.
    delay_samples = 0

    def __init__(self, module: StreamedQwen3Decoder) -> None:
        self.module = module
        self.device = module.decoder.pre_conv.conv.weight.device

    def state_shapes(self) -> list[tuple[tuple[int, ...], torch.dtype]]:
        return self.module.state_shapes()

    def initial_state(self) -> list[Tensor]:
        return [torch.zeros(shape, dtype=dtype, device=self.device) for shape, dtype in self.state_shapes()]

    def initial_states(self, batch: int) -> list[Tensor]:
        """`batch` streams' initial states, batched as `step` takes them."""
        return [torch.zeros((batch, *shape), dtype=dtype, device=self.device) for shape, dtype in self.state_shapes()]

    def step(self, frames: Tensor, frames_before: Tensor, states: Sequence[Tensor]) -> tuple[Tensor, list[Tensor]]:
        """frames [B, n, quantizers] of streams at frames_before [B], states batched [B, *shape]
        → (audio [B, n * spf] float32, the states after them, batched alike)."""
        with torch.inference_mode():
            audio, *new = self.module(frames.to(self.device), frames_before.to(self.device), *states)
        return audio.float(), new

    def decode(self, frames: Tensor, states: Sequence[Sequence[Tensor]], frames_before: Sequence[int],
               totals: Sequence[int | None]) -> tuple[Tensor, list[list[Tensor]]]:
        batched = [torch.stack(per_stream) for per_stream in zip(*states)]
        audio, new = self.step(frames, torch.tensor(list(frames_before)), batched)
        return audio, [list(stream) for stream in zip(*(state.unbind(0) for state in new))]
