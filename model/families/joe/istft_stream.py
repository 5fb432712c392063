"""The iSTFT decoder run on a stream of frames: each frame decoded once, exactly as a whole decode.

Windowed decoding (engine/audio/decoder.py) pays every window's context again: 20 frames of joe
context on an 8-frame window is 3.5x the work, and under load, when listeners are near running
dry, most windows are that small (16 HTTP streams on the 2-core machine decoded 1.8 frames per
frame emitted). Here each layer of the decoder keeps the inputs its kernel still needs
(model/codecs/streaming_conv.py), so a piece of n frames costs n frames, whatever n is, and the
audio equals the whole-utterance decode's. The price is a fixed lag: the audio of the samples
before frames_fed * 256 - `delay_samples` (10.6 frames) is final.

`IncrementalIstft` is the computation (a module, exported to ONNX as one graph whose states are
inputs and outputs); `TorchIncrementalDecoder` and `OnnxIncrementalDecoder` run it for the engine.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from torch import Tensor, nn

from model.codecs.streaming_conv import Delay, Positions, StreamingConv, StreamingUpsample
from model.families.joe.hifigan import _SLOPE
from model.families.joe.istft import IstftDecoder
from model.families.joe.teacher import onnx_session, write_aside

Layer = StreamingConv | StreamingUpsample | Delay


class IncrementalIstft(nn.Module):
    """forward(z [B, 192, n], frames_before [B], totals [B], *states) → (audio [B, n * 256],
    *states'). Invariant: for a stream fed frames [0, c) before and n frames now, the audio is
    the samples [c * 256 - delay_samples, (c + n) * 256 - delay_samples) of the whole decode of
    its frames (zeros past its end once `totals` holds its frame count instead of
    Positions.OPEN), and its states depend on its own frames only. State i is [B, C_i, H_i]."""

    def __init__(self, decoder: IstftDecoder) -> None:
        super().__init__()
        self.decoder = decoder.eval().requires_grad_(False)
        trunk, head = decoder.trunk, decoder.head
        self.rate = trunk.positions_per_frame
        self.bins = head.bins
        self.max_log_magnitude = head.config.max_log_magnitude
        self.conv_pre = StreamingConv(trunk.conv_pre)
        self.upsample = StreamingUpsample.of(trunk.upsample, _SLOPE)
        self.blocks = [[StreamingConv(conv, _SLOPE, residual=True) for conv in block.convs] for block in trunk.resblocks]
        lags = [sum(conv.delay for conv in block) for block in self.blocks]
        self.block_lag = max(lags)
        # Parallel blocks of different lags meet in a sum: the quicker ones wait for the slowest.
        self.aligners = [Delay(trunk.out_channels, self.block_lag - lag, block[-1].dtype) if lag < self.block_lag
                         else None for lag, block in zip(lags, self.blocks)]
        self.conv_in = StreamingConv(head.conv_in, _SLOPE)
        self.head_block = [StreamingConv(conv, _SLOPE, residual=True) for conv in head.block.convs]
        self.conv_out = StreamingConv(head.conv_out, _SLOPE)
        self.istft = StreamingUpsample(head.basis, None, head.hop, None)
        self.layers: list[Layer] = [self.conv_pre, self.upsample, *(c for b in self.blocks for c in b),
                                    *filter(None, self.aligners), self.conv_in, *self.head_block, self.conv_out, self.istft]
        positions_lag = (self.conv_pre.delay * self.rate + self.upsample.padding + self.block_lag
                         + self.conv_in.delay + sum(c.delay for c in self.head_block) + self.conv_out.delay)
        self.delay_samples = positions_lag * head.hop + self.istft.padding

    def state_shapes(self) -> list[tuple[int, int]]:
        """One stream's state: [channels, history] per layer."""
        return [(layer.channels, layer.state_length) for layer in self.layers]

    def forward(self, z: Tensor, frames_before: Tensor, totals: Tensor, *states: Tensor) -> tuple[Tensor, ...]:
        given = iter(states)
        new: list[Tensor] = []

        def run(layer: Layer, x: Tensor) -> Tensor:
            y, state = layer(x, next(given))
            new.append(state)
            return y

        at = Positions(frames_before, totals)
        z = at.apply(z)  # frames fed past the end (a flush) are the zero padding, whatever they hold
        at = at.shifted(self.conv_pre.delay)
        x = at.apply(run(self.conv_pre, z))
        at = at.scaled(self.rate, -self.upsample.padding)
        x = at.apply(run(self.upsample, x))
        branches = []
        for block in self.blocks:
            y, y_at = x, at
            for conv in block:
                y_at = y_at.shifted(conv.delay)
                y = y_at.apply(run(conv, y))
            branches.append(y)
        x = sum(y if aligner is None else run(aligner, y) for aligner, y in zip(self.aligners, branches)) / len(branches)
        at = at.shifted(self.block_lag + self.conv_in.delay)
        x = at.apply(run(self.conv_in, x))
        for conv in self.head_block:
            at = at.shifted(conv.delay)
            x = at.apply(run(conv, x))
        at = at.shifted(self.conv_out.delay)
        x = run(self.conv_out, x).float()
        log_magnitude, phase = x.split(self.bins, dim=1)
        magnitude = torch.exp(log_magnitude.clamp(max=self.max_log_magnitude))
        spectrum = at.apply(torch.cat([magnitude * torch.cos(phase), magnitude * torch.sin(phase)], dim=1))
        audio = run(self.istft, spectrum)[:, 0].clamp(-1.0, 1.0)
        return (audio, *new)


def state_names(count: int) -> list[str]:
    """The ONNX graph's state inputs (each one's output is `next_` + its name)."""
    return [f"state_{i}" for i in range(count)]


def _totals(totals: Sequence[int | None]) -> list[int]:
    return [Positions.OPEN if total is None else total for total in totals]


class TorchIncrementalDecoder:
    """The IncrementalDecoder (model/codecs/base.py) of joe's iSTFT decoder, run by PyTorch on
    the module's device; a stream's state is a list of tensors."""

    def __init__(self, module: IncrementalIstft) -> None:
        self.module = module
        self.delay_samples = module.delay_samples

    def initial_state(self) -> list[Tensor]:
        weight = self.module.decoder.trunk.conv_pre.weight
        return [weight.new_zeros(shape) for shape in self.module.state_shapes()]

    def decode(self, frames: Tensor, states: Sequence[Sequence[Tensor]], frames_before: Sequence[int],
               totals: Sequence[int | None]) -> tuple[Tensor, list[list[Tensor]]]:
        device = self.module.decoder.trunk.conv_pre.weight.device
        with torch.inference_mode():
            audio, *new = self.module(
                frames.to(device=device, dtype=torch.float32).transpose(1, 2),
                torch.tensor(list(frames_before), device=device), torch.tensor(_totals(totals), device=device),
                *(torch.stack(layer_states) for layer_states in zip(*states)))
        return audio, [list(stream) for stream in zip(*(state.unbind(0) for state in new))]


class OnnxIncrementalDecoder:
    """The same computation as one onnxruntime graph (CPU). On the 2-core machine it runs a
    piece at about the per-frame cost of a whole window (onnxruntime's convolutions and small
    per-node overhead), where PyTorch pays ~5 ms of overhead per call. A stream's state is a list
    of float32 arrays."""

    def __init__(self, module: IncrementalIstft, path: Path, threads: int = 1) -> None:
        self.delay_samples = module.delay_samples
        self._shapes = module.state_shapes()
        self.session = onnx_session(path, threads)
        self._state_names = state_names(len(self._shapes))

    def initial_state(self) -> list[np.ndarray]:
        return [np.zeros(shape, np.float32) for shape in self._shapes]

    def decode(self, frames: Tensor, states: Sequence[Sequence[np.ndarray]], frames_before: Sequence[int],
               totals: Sequence[int | None]) -> tuple[Tensor, list[list[np.ndarray]]]:
        z = np.ascontiguousarray(frames.detach().to("cpu", torch.float32).transpose(1, 2).numpy())
        feeds = {"z": z, "frames_before": np.asarray(frames_before, np.int64), "totals": np.asarray(_totals(totals), np.int64)}
        feeds.update((name, np.stack(layer_states)) for name, layer_states in zip(self._state_names, zip(*states)))
        audio, *new = self.session.run(None, feeds)
        return torch.from_numpy(audio), [list(stream) for stream in zip(*new)]


def export_incremental_onnx(module: IncrementalIstft, target: Path) -> Path:
    """Writes `module` to `target` as one ONNX graph: batch and piece length dynamic, each state
    an input (`state_i`) and an output (`next_state_i`)."""
    names = state_names(len(module.layers))
    states = [torch.zeros(2, *shape) for shape in module.state_shapes()]
    example = (torch.zeros(2, module.decoder.trunk.conv_pre.in_channels, 8), torch.zeros(2, dtype=torch.long),
               torch.full((2,), Positions.OPEN), *states)
    dynamic = {"z": {0: "batch", 2: "frames"}, "frames_before": {0: "batch"}, "totals": {0: "batch"},
               "audio": {0: "batch", 1: "samples"}}
    dynamic.update({name: {0: "batch"} for name in names})
    dynamic.update({f"next_{name}": {0: "batch"} for name in names})

    def write(staging: str) -> None:
        with torch.no_grad():
            torch.onnx.export(module, example, staging, input_names=["z", "frames_before", "totals", *names],
                              output_names=["audio", *(f"next_{name}" for name in names)], dynamic_axes=dynamic,
                              opset_version=17, dynamo=False)

    return write_aside(target, write)
