"""Our port of SNAC's decoding path (codes → waveform), reading and writing SNAC's own folders:
`config.json` (SNAC's constructor arguments) and `pytorch_model.bin` (SNAC's state dict)."""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Sequence

import torch
from torch import Tensor, nn

from model.codecs.snac_layers import (
    NoiseBlock,
    ResidualCodebooks,
    Snake1d,
    Stack,
    encoder_layout,
    upsampling_block,
)

_CONFIG_FILE = "config.json"
_WEIGHTS_FILE = "pytorch_model.bin"
# Weight-norm (magnitude, direction) key suffixes: torch.nn.utils.parametrizations.weight_norm,
# and the older torch.nn.utils.weight_norm, which SNAC files saved with it still carry.
_WEIGHT_NORM_SUFFIXES = (
    (".parametrizations.weight.original0", ".parametrizations.weight.original1"),
    (".weight_g", ".weight_v"),
)
# Random checkpoints: each residual unit adds its own variance, so unit-gain convs saturate the
# output tanh; at 0.6 the tiny codec's output has a standard deviation of about 0.1-0.15.
_RANDOM_CONV_GAIN = 0.6
_RANDOM_BIAS_STD = 0.05


@dataclass(slots=True)
class SnacConfig:
    """SNAC's constructor arguments (the keys of its config.json), defaults = the 24 kHz model.
    Invariant: level i of a code list holds strides[0] / strides[i] codes per first-level code,
    and each latent step decodes to `hop_length` samples."""

    sampling_rate: int = 24000
    encoder_dim: int = 48
    encoder_rates: tuple[int, ...] = (2, 4, 8, 8)
    latent_dim: int | None = None
    decoder_dim: int = 1024
    decoder_rates: tuple[int, ...] = (8, 8, 4, 2)
    attn_window_size: int | None = None
    codebook_size: int = 4096
    codebook_dim: int = 8
    vq_strides: tuple[int, ...] = (4, 2, 1)
    noise: bool = True
    depthwise: bool = True

    def __post_init__(self) -> None:
        for name in ("encoder_rates", "decoder_rates", "vq_strides"):
            values = tuple(getattr(self, name))
            if not values or any(v < 1 for v in values):
                raise ValueError(f"{name} must be a non-empty list of positive ints, got {values}")
            setattr(self, name, values)
        sizes = ("sampling_rate", "encoder_dim", "decoder_dim", "codebook_size", "codebook_dim")
        for name in sizes:
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        for name in ("latent_dim", "attn_window_size"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise ValueError(f"{name} must be positive or None, got {getattr(self, name)}")
        if self.decoder_dim % 2 ** len(self.decoder_rates):
            raise ValueError(
                f"decoder_dim {self.decoder_dim} must be divisible by 2**{len(self.decoder_rates)}"
            )
        if any(self.vq_strides[0] % stride for stride in self.vq_strides):
            raise ValueError(f"vq_strides[0] must be a multiple of every stride: {self.vq_strides}")

    @property
    def latent_channels(self) -> int:
        return self.latent_dim or self.encoder_dim * 2 ** len(self.encoder_rates)

    @property
    def hop_length(self) -> int:
        return math.prod(self.decoder_rates)

    @classmethod
    def from_file(cls, path: str | Path) -> SnacConfig:
        data = json.loads(Path(path).read_text())
        unknown = set(data) - {f.name for f in fields(cls)}
        if unknown:
            raise ValueError(f"{path}: keys that are not SNAC arguments: {sorted(unknown)}")
        return cls(**data)

    def to_dict(self) -> dict:
        return asdict(self)


def tiny_snac_config() -> SnacConfig:
    """A SNAC-shaped codec for tests: 3 levels, 2048 samples per first-level code at 24 kHz."""
    return SnacConfig(encoder_dim=8, decoder_dim=64, codebook_size=1024)


class SnacDecoder(nn.Module):
    """SNAC's decode: codes (list of [B, n·s0/s_i] int tensors) → waveform [B, 1, n·s0·hop] in
    [-1, 1]. Parameter names equal SNAC's, minus the encoder and the quantizers' in_proj."""

    def __init__(self, config: SnacConfig) -> None:
        super().__init__()
        if config.attn_window_size is not None:
            raise NotImplementedError(
                "SNAC local attention (attn_window_size set, as in the 32/44 kHz models) is not "
                "ported; only attn_window_size=None checkpoints (the 24 kHz model) load"
            )
        self.config = config
        latent, channels = config.latent_channels, config.decoder_dim
        self.quantizer = ResidualCodebooks(
            latent, config.codebook_size, config.codebook_dim, config.vq_strides
        )
        if config.depthwise:
            layers: list[nn.Module] = [
                nn.Conv1d(latent, latent, 7, padding=3, groups=latent),
                nn.Conv1d(latent, channels, 1),
            ]
        else:
            layers = [nn.Conv1d(latent, channels, 7, padding=3)]
        for i, stride in enumerate(config.decoder_rates):
            out_dim = channels // 2 ** (i + 1)
            groups = out_dim if config.depthwise else 1
            layers.append(upsampling_block(channels // 2**i, out_dim, stride, config.noise, groups))
        layers += [Snake1d(out_dim), nn.Conv1d(out_dim, 1, 7, padding=3), nn.Tanh()]
        self.decoder = Stack(layers, attribute="model")

    @property
    def noise(self) -> bool:
        return any(m.enabled for m in self.modules() if isinstance(m, NoiseBlock))

    @noise.setter
    def noise(self, enabled: bool) -> None:
        if enabled and not self.config.noise:
            raise ValueError("this SNAC checkpoint was built without noise blocks")
        for module in self.modules():
            if isinstance(module, NoiseBlock):
                module.enabled = enabled

    def decode(self, codes: Sequence[Tensor]) -> Tensor:
        strides = self.config.vq_strides
        if len(codes) != len(strides):
            raise ValueError(f"expected {len(strides)} code levels, got {len(codes)}")
        batch, latent_steps = codes[0].shape[0], codes[0].shape[-1] * strides[0]
        for level, (level_codes, stride) in enumerate(zip(codes, strides)):
            if level_codes.dim() != 2 or level_codes.shape != (batch, latent_steps // stride):
                raise ValueError(
                    f"level {level} codes must be [{batch}, {latent_steps // stride}], "
                    f"got {list(level_codes.shape)}"
                )
        return self.decoder(self.quantizer(codes))

    @classmethod
    def from_pretrained(
        cls,
        path: str | Path,
        device: str | torch.device = "cpu",
        dtype: torch.dtype = torch.float32,
    ) -> SnacDecoder:
        path = Path(path)
        config = SnacConfig.from_file(path / _CONFIG_FILE)
        state = torch.load(path / _WEIGHTS_FILE, map_location="cpu", weights_only=True)
        with torch.device("meta"):
            model = cls(config)
        model.load_state_dict(_decoder_weights(state), assign=True)
        return model.to(device=device, dtype=dtype).eval().requires_grad_(False)


def _decoder_weights(state: dict[str, Tensor]) -> dict[str, Tensor]:
    """SNAC's state dict with weight norm folded into plain weights, decoder keys only."""
    weights: dict[str, Tensor] = {}
    for key, tensor in state.items():
        if key.startswith("encoder.") or ".in_proj." in key:
            continue
        for magnitude_suffix, direction_suffix in _WEIGHT_NORM_SUFFIXES:
            if key.endswith(direction_suffix):
                break
            if key.endswith(magnitude_suffix):
                stem = key[: -len(magnitude_suffix)]
                direction = state[stem + direction_suffix]
                weights[f"{stem}.weight"] = _fold_weight_norm(tensor, direction)
                break
        else:
            weights[key] = tensor.float()
    return weights


def _fold_weight_norm(magnitude: Tensor, direction: Tensor) -> Tensor:
    # SNAC normalises over every dim but 0 (out channels for Conv1d, in for ConvTranspose1d).
    direction = direction.float()
    return direction * (magnitude.float() / _norm_over_all_but_dim0(direction))


def _norm_over_all_but_dim0(tensor: Tensor) -> Tensor:
    return torch.linalg.vector_norm(tensor, dim=tuple(range(1, tensor.dim())), keepdim=True)


def save_random_snac(path: str | Path, config: SnacConfig, seed: int = 0) -> Path:
    """Writes a SNAC folder (config.json, pytorch_model.bin with every key SNAC expects, weight
    norm as parametrizations) with weights drawn from `seed`; returns the folder."""
    path = Path(path)
    generator = torch.Generator().manual_seed(seed)
    with torch.device("meta"):
        encoder = encoder_layout(config.encoder_dim, config.encoder_rates, config.depthwise)
        parts: list[tuple[str, nn.Module]] = [("", SnacDecoder(config)), ("encoder.", encoder)]
        parts += [
            (
                f"quantizer.quantizers.{i}.in_proj.",
                nn.Conv1d(config.latent_channels, config.codebook_dim, 1),
            )
            for i in range(len(config.vq_strides))
        ]
    state: dict[str, Tensor] = {}
    for prefix, module in parts:
        module = module.to_empty(device="cpu")
        _randomize(module, generator)
        state.update(_weight_normed_state(module, prefix, generator))
    path.mkdir(parents=True, exist_ok=True)
    (path / _CONFIG_FILE).write_text(json.dumps(config.to_dict(), indent=2) + "\n")
    torch.save(state, path / _WEIGHTS_FILE)
    return path


@torch.no_grad()
def _randomize(module: nn.Module, generator: torch.Generator) -> None:
    # Small biases keep the output driven by the codes rather than by bias patterns; α spreads
    # around 1 like trained values, so a swapped or ignored α shows.
    for m in module.modules():
        if isinstance(m, nn.Conv1d):
            std = _RANDOM_CONV_GAIN * m.weight[0].numel() ** -0.5
            m.weight.normal_(0.0, std, generator=generator)
        elif isinstance(m, nn.ConvTranspose1d):
            taps = m.weight.shape[0] * m.weight.shape[2] // m.stride[0]
            m.weight.normal_(0.0, _RANDOM_CONV_GAIN * taps**-0.5, generator=generator)
        elif isinstance(m, nn.Embedding):
            m.weight.normal_(0.0, 1.0, generator=generator)
        elif isinstance(m, Snake1d):
            m.alpha.uniform_(0.5, 1.5, generator=generator)
        if isinstance(m, (nn.Conv1d, nn.ConvTranspose1d)) and m.bias is not None:
            m.bias.normal_(0.0, _RANDOM_BIAS_STD, generator=generator)


def _weight_normed_state(
    module: nn.Module, prefix: str, generator: torch.Generator
) -> dict[str, Tensor]:
    conv_weights = {
        f"{name}.weight" if name else "weight"
        for name, m in module.named_modules()
        if isinstance(m, (nn.Conv1d, nn.ConvTranspose1d))
    }
    magnitude_suffix, direction_suffix = _WEIGHT_NORM_SUFFIXES[0]
    state: dict[str, Tensor] = {}
    for key, tensor in module.state_dict().items():
        if key in conv_weights:
            stem = prefix + key[: -len(".weight")] if key != "weight" else prefix.rstrip(".")
            norm = _norm_over_all_but_dim0(tensor)
            # A direction of arbitrary length, as in trained files: only magnitude · unit
            # direction gives the weight back.
            scale = torch.empty_like(norm).uniform_(0.5, 2.0, generator=generator)
            state[stem + magnitude_suffix] = norm.clone()
            state[stem + direction_suffix] = tensor * scale
        else:
            state[prefix + key] = tensor.clone()
    return state
