"""Qwen3-TTS's speaker encoder: a clip's x-vector, the vector a base checkpoint's talker takes in
place of a named speaker's codec row when it clones a voice (`Qwen3Frontend.prepare_clone`).

The network is an ECAPA-TDNN (Desplanques et al., 2020, arXiv:2005.07143) over the clip's log-mel
(speaker_mel.py): a TDNN layer, SE-Res2Net blocks, multi-layer aggregation of the blocks' outputs,
attentive statistics pooling over time, then a 1x1 convolution to `enc_dim`. Every convolution
keeps the frame count, padding by reflection. Module names follow the checkpoint's
`speaker_encoder.*` keys, so its weights load by name. It runs where prompts are prepared, once a
clip, never in the engine step (loading.py leaves these weights out of the engine)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from model.codecs.resample import encoder_input
from model.families.qwen3_tts.config import Qwen3TtsConfig
from model.families.qwen3_tts.speaker_mel import NUM_MELS, SAMPLE_RATE, LogMel, samples_for_frames
from model.llama.loader import checkpoint_weights
from model.llama.model import copy_weights

PREFIX = "speaker_encoder."
# The pooling's floor under a variance, so a constant channel has a finite square root.
VARIANCE_FLOOR = 1e-12


@dataclass(frozen=True, slots=True)
class EcapaShape:
    """config.json's `speaker_encoder_config`. Invariants: one channel count, kernel and dilation
    per layer (a first TDNN layer, at least one SE-Res2Net block, the aggregation layer); a block
    keeps its input's width (its residual adds them) and splits evenly into `res2net_scale` groups;
    the aggregation layer is as wide as the blocks' outputs side by side."""

    mel_dim: int
    enc_dim: int
    channels: tuple[int, ...]
    kernels: tuple[int, ...]
    dilations: tuple[int, ...]
    attention_channels: int
    res2net_scale: int
    se_channels: int
    sample_rate: int

    def __post_init__(self) -> None:
        layers = len(self.channels)
        if layers < 3 or not layers == len(self.kernels) == len(self.dilations):
            raise ValueError("enc_channels, enc_kernel_sizes and enc_dilations need one entry per layer, 3 or more")
        blocks = self.channels[1:-1]
        if any(width != self.channels[0] or width % self.res2net_scale for width in blocks):
            raise ValueError(f"SE-Res2Net widths {blocks} must equal the first layer's ({self.channels[0]}) "
                             f"and divide by enc_res2net_scale ({self.res2net_scale})")
        if sum(blocks) != self.channels[-1]:
            raise ValueError(f"the aggregation width {self.channels[-1]} must be the blocks' sum {sum(blocks)}")
        if (self.mel_dim, self.sample_rate) != (NUM_MELS, SAMPLE_RATE):
            raise ValueError(f"the speaker features are {NUM_MELS} mels at {SAMPLE_RATE} Hz, "
                             f"the config says {self.mel_dim} at {self.sample_rate}")

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EcapaShape:
        return cls(mel_dim=int(d["mel_dim"]), enc_dim=int(d["enc_dim"]), channels=tuple(d["enc_channels"]),
                   kernels=tuple(d["enc_kernel_sizes"]), dilations=tuple(d["enc_dilations"]),
                   attention_channels=int(d["enc_attention_channels"]), res2net_scale=int(d["enc_res2net_scale"]),
                   se_channels=int(d["enc_se_channels"]), sample_rate=int(d.get("sample_rate", SAMPLE_RATE)))

    @property
    def min_frames(self) -> int:
        """The fewest frames every reflect padding accepts (a side's padding must be shorter than the input)."""
        return max(math.ceil(d * (k - 1) / 2) for k, d in zip(self.kernels, self.dilations)) + 1


class TimeDelayLayer(nn.Module):
    """A convolution over frames (same length out, reflect padding), then ReLU."""

    def __init__(self, c_in: int, c_out: int, kernel: int, dilation: int = 1) -> None:
        super().__init__()
        self.conv = nn.Conv1d(c_in, c_out, kernel, dilation=dilation, padding="same", padding_mode="reflect")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x))


class Res2Net(nn.Module):
    """Channels in `scale` equal groups: the first passes through, each later one is convolved
    after adding the previous group's result, so later groups see ever wider context."""

    def __init__(self, channels: int, scale: int, kernel: int, dilation: int) -> None:
        super().__init__()
        width = channels // scale
        self.blocks = nn.ModuleList(TimeDelayLayer(width, width, kernel, dilation) for _ in range(scale - 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        first, *groups = x.chunk(len(self.blocks) + 1, dim=1)
        outputs, previous = [first], None
        for block, group in zip(self.blocks, groups):
            previous = block(group if previous is None else group + previous)
            outputs.append(previous)
        return torch.cat(outputs, dim=1)


class SqueezeExcitation(nn.Module):
    """Scales each channel by a gate in (0, 1) computed from every channel's mean over time."""

    def __init__(self, channels: int, bottleneck: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv1d(channels, bottleneck, 1)
        self.conv2 = nn.Conv1d(bottleneck, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(self.conv2(torch.relu(self.conv1(x.mean(dim=2, keepdim=True)))))


class SeRes2NetBlock(nn.Module):
    """1x1 TDNN, Res2Net, 1x1 TDNN, squeeze-excitation, plus the input: width and length kept."""

    def __init__(self, channels: int, shape: EcapaShape, kernel: int, dilation: int) -> None:
        super().__init__()
        self.tdnn1 = TimeDelayLayer(channels, channels, 1)
        self.res2net_block = Res2Net(channels, shape.res2net_scale, kernel, dilation)
        self.tdnn2 = TimeDelayLayer(channels, channels, 1)
        self.se_block = SqueezeExcitation(channels, shape.se_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.se_block(self.tdnn2(self.res2net_block(self.tdnn1(x))))


def weighted_statistics(x: torch.Tensor, weights: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per channel, the mean and standard deviation over time under `weights` (summing to 1 over time)."""
    mean = (weights * x).sum(dim=2, keepdim=True)
    variance = (weights * (x - mean).pow(2)).sum(dim=2, keepdim=True)
    return mean, variance.clamp(min=VARIANCE_FLOOR).sqrt()


class AttentiveStatisticsPooling(nn.Module):
    """[B, C, T] → [B, 2C, 1]: the mean and deviation over time under per-channel attention, whose
    scores see each frame together with the whole clip's plain mean and deviation."""

    def __init__(self, channels: int, attention_channels: int) -> None:
        super().__init__()
        self.tdnn = TimeDelayLayer(3 * channels, attention_channels, 1)
        self.conv = nn.Conv1d(attention_channels, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        frames = x.shape[2]
        mean, deviation = weighted_statistics(x, torch.full_like(x[:, :1], 1.0 / frames))
        context = torch.cat([x, mean.expand(-1, -1, frames), deviation.expand(-1, -1, frames)], dim=1)
        attention = torch.softmax(self.conv(torch.tanh(self.tdnn(context))), dim=2)
        return torch.cat(weighted_statistics(x, attention), dim=1)


class EcapaTdnn(nn.Module):
    """[B, frames, mels] log-mel → [B, enc_dim] x-vectors; frames >= `shape.min_frames`."""

    def __init__(self, shape: EcapaShape) -> None:
        super().__init__()
        c, k, d = shape.channels, shape.kernels, shape.dilations
        self.blocks = nn.ModuleList([TimeDelayLayer(shape.mel_dim, c[0], k[0], d[0])]
                                    + [SeRes2NetBlock(c[i], shape, k[i], d[i]) for i in range(1, len(c) - 1)])
        self.mfa = TimeDelayLayer(c[-1], c[-1], k[-1], d[-1])
        self.asp = AttentiveStatisticsPooling(c[-1], shape.attention_channels)
        self.fc = nn.Conv1d(2 * c[-1], shape.enc_dim, 1)

    def forward(self, mel: torch.Tensor) -> torch.Tensor:
        x = self.blocks[0](mel.transpose(1, 2))
        block_outputs = []
        for block in self.blocks[1:]:
            x = block(x)
            block_outputs.append(x)
        return self.fc(self.asp(self.mfa(torch.cat(block_outputs, dim=1))))[:, :, 0]


class SpeakerEncoder:
    """A base checkpoint's speaker encoder, ready to embed clips. Invariant: the network holds
    exactly the checkpoint's `speaker_encoder.*` weights (no key missing, none extra), in float32,
    in eval mode; `embed` is a pure function of the clip (no state carries between calls)."""

    def __init__(self, network: EcapaTdnn, shape: EcapaShape, device: torch.device | str = "cpu") -> None:
        self.network, self.shape, self.device = network.eval(), shape, torch.device(device)
        self.log_mel = LogMel(self.device)
        self.min_samples = samples_for_frames(shape.min_frames)

    @classmethod
    def from_checkpoint(cls, path: Path, config: Qwen3TtsConfig, device: torch.device | str = "cpu") -> SpeakerEncoder:
        if config.model_type != "base":
            raise ValueError(f"{path} is a {config.model_type} checkpoint: only base checkpoints carry "
                             "a speaker encoder (voice cloning)")
        weights = [(name, tensor.float()) for name, tensor in checkpoint_weights(path) if name.startswith(PREFIX)]
        if not weights:
            raise ValueError(f"{path} has no {PREFIX}* weights: it cannot embed a voice")
        shape = EcapaShape.from_dict(config.speaker_encoder)
        network = EcapaTdnn(shape).to(device)
        # Keyed by the checkpoint's names, so a load error names the key as the file spells it.
        with torch.no_grad():
            copy_weights({PREFIX + name: tensor for name, tensor in network.state_dict().items()}, weights)
        return cls(network, shape, device)

    @torch.inference_mode()
    def embed(self, audio: torch.Tensor | np.ndarray, sample_rate: int) -> torch.Tensor:
        """A mono float clip in [-1, 1] at any rate → its x-vector [enc_dim], float32, on the CPU."""
        clip = encoder_input(audio, sample_rate, SAMPLE_RATE)
        if clip.size < self.min_samples:
            raise ValueError(f"audio is too short: the speaker encoder needs {self.min_samples} samples at "
                             f"{SAMPLE_RATE} Hz or more, got {clip.size}")
        mel = self.log_mel(torch.from_numpy(clip).to(self.device))
        return self.network(mel[None])[0].float().cpu()
