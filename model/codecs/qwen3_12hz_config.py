"""The Qwen3-TTS 12 Hz codec's configuration, read from a speech_tokenizer folder's config.json
(the reference's Qwen3TTSTokenizerV2Config): the decoder's (`decoder_config` plus the top-level
`output_sample_rate` and `decode_upsample_rate`) and the encoder's (`encoder_config`, a Mimi
configuration, plus the top-level `input_sample_rate`, `encode_downsample_rate` and
`encoder_valid_num_quantizers`)."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CONFIG_FILE = "config.json"


@dataclass(frozen=True, slots=True)
class Qwen3CodecConfig:
    """The decoder's shape. Invariant: one frame of `num_quantizers` codes decodes to
    `samples_per_frame` = prod(upsampling_ratios) * prod(upsample_rates) samples at
    `sample_rate`, and every attention layer sees `sliding_window` positions (itself included).
    Defaults are the reference configuration class's (the released checkpoint overrides several:
    read them from its config.json); that class has no codebook_dim (only the file sets it: 512)."""

    codebook_size: int = 2048
    codebook_dim: int = 512
    num_quantizers: int = 16
    latent_dim: int = 1024
    hidden_size: int = 1024
    intermediate_size: int = 3072
    num_hidden_layers: int = 8
    num_attention_heads: int = 16
    num_key_value_heads: int = 16
    head_dim: int = 64
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-5
    sliding_window: int = 72
    upsample_rates: tuple[int, ...] = (8, 5, 4, 3)
    upsampling_ratios: tuple[int, ...] = (2, 2)
    decoder_dim: int = 1536
    sample_rate: int = 24000

    def __post_init__(self) -> None:
        object.__setattr__(self, "upsample_rates", tuple(int(r) for r in self.upsample_rates))
        object.__setattr__(self, "upsampling_ratios", tuple(int(r) for r in self.upsampling_ratios))
        object.__setattr__(self, "rope_theta", float(self.rope_theta))
        positive = ("codebook_size", "codebook_dim", "num_quantizers", "latent_dim", "hidden_size",
                    "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                    "head_dim", "sliding_window", "decoder_dim", "sample_rate")
        for name in positive:
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if any(r < 1 for r in self.upsample_rates + self.upsampling_ratios):
            raise ValueError("upsample_rates and upsampling_ratios must be positive")
        if self.num_quantizers < 2:
            raise ValueError("the split quantizer needs a semantic codebook and at least one acoustic one")
        if self.codebook_dim % 2:
            raise ValueError(f"codebook_dim must be even (codebooks are half as wide), got {self.codebook_dim}")
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError("num_attention_heads must be a multiple of num_key_value_heads")
        if self.head_dim % 2:
            raise ValueError(f"head_dim must be even (rotary pairs), got {self.head_dim}")
        if self.decoder_dim % 2 ** len(self.upsample_rates):
            raise ValueError(f"decoder_dim {self.decoder_dim} must be divisible by 2**{len(self.upsample_rates)}")

    @property
    def samples_per_frame(self) -> int:
        return math.prod(self.upsampling_ratios) * math.prod(self.upsample_rates)

    @property
    def past_positions(self) -> int:
        """Earlier positions an attention query sees: its window less itself."""
        return self.sliding_window - 1

    @classmethod
    def from_tokenizer_dict(cls, data: dict[str, Any]) -> Qwen3CodecConfig:
        """From a speech tokenizer's config.json contents; refuses what this port does not compute."""
        decoder = dict(data.get("decoder_config") or {})
        if decoder.get("hidden_act", "silu") != "silu":
            raise ValueError(f"unsupported hidden_act {decoder['hidden_act']!r} (only 'silu')")
        if decoder.get("attention_bias"):
            raise ValueError("a codec decoder with attention bias is not supported")
        rope = decoder.get("rope_scaling") or {}
        if rope.get("rope_type", rope.get("type", "default")) != "default":
            raise ValueError(f"unsupported rope_scaling {rope!r} (only the default RoPE)")
        if "sliding_window" in decoder and decoder["sliding_window"] is None:
            raise ValueError("the codec decoder needs a sliding_window (its streaming state is that window)")
        defaults = cls()
        names = {name for name in cls.__dataclass_fields__ if name != "sample_rate"}
        values = {name: decoder[name] for name in names if name in decoder}
        heads = int(values.get("num_attention_heads", defaults.num_attention_heads))
        # As the reference: head_dim when the file sets it, else hidden_size / heads.
        values.setdefault("head_dim", int(values.get("hidden_size", defaults.hidden_size)) // heads)
        config = cls(**values, sample_rate=int(data.get("output_sample_rate", defaults.sample_rate)))
        _check_samples_per_frame(data, "decode_upsample_rate", config.samples_per_frame,
                                 "the decoder's upsampling, prod(upsample_rates + upsampling_ratios)")
        return config

    @classmethod
    def from_folder(cls, folder: str | Path) -> Qwen3CodecConfig:
        return cls.from_tokenizer_dict(_read(folder))


def _read(folder: str | Path) -> dict[str, Any]:
    return json.loads((Path(folder) / CONFIG_FILE).read_text())


def _check_samples_per_frame(data: dict[str, Any], key: str, samples: int, derivation: str) -> None:
    """The file's top-level statement of a frame's samples agrees with the shape's (or is absent)."""
    stated = int(data.get(key, samples))
    if stated != samples:
        raise ValueError(f"{key} {stated} is not {derivation}: {samples}")


@dataclass(frozen=True, slots=True)
class Qwen3EncoderConfig:
    """The encoder's shape (Mimi's, trimmed to what encoding reads). Invariant: a clip at
    `sample_rate` is downsampled by prod(upsampling_ratios) in the convolutions (one transformer
    position per `conv_hop` samples), then by 2, so a frame of `valid_quantizers` codes is
    `samples_per_frame` samples. Defaults are MimiConfig's and the reference's top-level ones.
    Mimi's `sliding_window` is not read: the reference applies none when it encodes (see
    qwen3_12hz_encoder_transformer.py)."""

    sample_rate: int = 24000
    hidden_size: int = 512
    num_filters: int = 64
    num_residual_layers: int = 1
    upsampling_ratios: tuple[int, ...] = (8, 6, 5, 4)
    kernel_size: int = 7
    last_kernel_size: int = 3
    residual_kernel_size: int = 3
    dilation_growth_rate: int = 2
    compress: int = 2
    codebook_size: int = 2048
    codebook_dim: int = 256
    num_quantizers: int = 32
    num_semantic_quantizers: int = 1
    num_hidden_layers: int = 8
    intermediate_size: int = 2048
    num_attention_heads: int = 8
    num_key_value_heads: int = 8
    head_dim: int = 64
    norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    frame_rate: float = 12.5
    valid_quantizers: int = 16

    def __post_init__(self) -> None:
        object.__setattr__(self, "upsampling_ratios", tuple(int(r) for r in self.upsampling_ratios))
        for name in ("rope_theta", "norm_eps", "frame_rate"):
            object.__setattr__(self, name, float(getattr(self, name)))
        positive = ("sample_rate", "hidden_size", "num_filters", "num_residual_layers", "kernel_size",
                    "last_kernel_size", "residual_kernel_size", "dilation_growth_rate", "compress",
                    "codebook_size", "codebook_dim", "num_quantizers", "num_semantic_quantizers",
                    "num_hidden_layers", "intermediate_size", "num_attention_heads", "num_key_value_heads",
                    "head_dim", "frame_rate", "valid_quantizers")
        for name in positive:
            if getattr(self, name) <= 0:
                raise ValueError(f"encoder {name} must be positive, got {getattr(self, name)}")
        if not self.upsampling_ratios or any(r < 1 for r in self.upsampling_ratios):
            raise ValueError(f"encoder upsampling_ratios must be positive, got {self.upsampling_ratios}")
        if not self.num_semantic_quantizers < self.valid_quantizers <= self.num_quantizers:
            raise ValueError(f"encoder_valid_num_quantizers {self.valid_quantizers} must exceed the "
                             f"{self.num_semantic_quantizers} semantic quantizers and not exceed {self.num_quantizers}")
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError("encoder num_attention_heads must be a multiple of num_key_value_heads")
        if self.head_dim % 2:
            raise ValueError(f"encoder head_dim must be even (rotary pairs), got {self.head_dim}")
        if self.downsample_kernel < 2:
            raise ValueError(f"encoder frame_rate {self.frame_rate} leaves no downsampling convolution "
                             f"(the convolutions run at {self.sample_rate / self.conv_hop} Hz)")

    @property
    def conv_hop(self) -> int:
        """Samples per position after the convolutions."""
        return math.prod(self.upsampling_ratios)

    @property
    def samples_per_frame(self) -> int:
        return 2 * self.conv_hop  # Mimi's downsampling convolution always has stride 2

    @property
    def downsample_kernel(self) -> int:
        # Mimi sizes it from the two rates (its "encodec" rate rounded up), whatever the stride.
        return 2 * int(math.ceil(self.sample_rate / self.conv_hop) / self.frame_rate)

    @classmethod
    def from_tokenizer_dict(cls, data: dict[str, Any]) -> Qwen3EncoderConfig:
        """From a speech tokenizer's config.json contents; refuses what this port does not compute."""
        encoder = dict(data.get("encoder_config") or {})
        unsupported = dict(audio_channels=1, use_causal_conv=True, pad_mode="constant", use_conv_shortcut=False,
                           hidden_act="gelu", attention_bias=False, use_streaming=False)
        for name, supported in unsupported.items():
            if encoder.get(name, supported) != supported:
                raise ValueError(f"unsupported encoder {name} {encoder[name]!r} (only {supported!r})")
        rope = encoder.get("rope_scaling") or {}
        if rope.get("rope_type", rope.get("type", "default")) != "default":
            raise ValueError(f"unsupported encoder rope_scaling {rope!r} (only the default RoPE)")
        defaults = cls()
        hidden = int(encoder.get("hidden_size", defaults.hidden_size))
        # Codebooks are codebook_dim wide (the hidden width when null) and the input projections
        # map onto vector_quantization_hidden_dimension: a nearest-vector search needs the two equal.
        width = encoder.get("codebook_dim", defaults.codebook_dim)
        width = hidden if width is None else int(width)
        if int(encoder.get("vector_quantization_hidden_dimension", defaults.codebook_dim)) != width:
            raise ValueError("encoder vector_quantization_hidden_dimension must equal its codebook_dim")
        names = set(cls.__dataclass_fields__) - {"sample_rate", "frame_rate", "valid_quantizers", "codebook_dim"}
        values = {name: encoder[name] for name in names if encoder.get(name) is not None}
        heads = int(values.get("num_attention_heads", defaults.num_attention_heads))
        values.setdefault("head_dim", hidden // heads)  # as Mimi: head_dim when set, else hidden / heads
        rate = int(data.get("input_sample_rate", defaults.sample_rate))
        if int(encoder.get("sampling_rate", rate)) != rate:
            raise ValueError(f"encoder sampling_rate {encoder['sampling_rate']} is not input_sample_rate {rate}")
        ratios = values.get("upsampling_ratios", defaults.upsampling_ratios)
        # Mimi stores a given frame rate as `_frame_rate`; without one it is the rate the strides give.
        frame_rate = encoder.get("_frame_rate", encoder.get("frame_rate")) or rate / (2 * math.prod(ratios))
        config = cls(**values, sample_rate=rate, frame_rate=frame_rate, codebook_dim=width,
                     valid_quantizers=int(data.get("encoder_valid_num_quantizers", defaults.valid_quantizers)))
        _check_samples_per_frame(data, "encode_downsample_rate", config.samples_per_frame,
                                 "the encoder's downsampling, 2 * prod(upsampling_ratios)")
        return config

    @classmethod
    def from_folder(cls, folder: str | Path) -> Qwen3EncoderConfig:
        return cls.from_tokenizer_dict(_read(folder))
