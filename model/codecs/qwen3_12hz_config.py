"""The Qwen3-TTS 12 Hz codec's decoder configuration, read from a speech_tokenizer folder's
config.json (the reference's Qwen3TTSTokenizerV2Config: `decoder_config` plus the top-level
`output_sample_rate` and `decode_upsample_rate`; the encoder's keys are not read)."""
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
        upsample = int(data.get("decode_upsample_rate", config.samples_per_frame))
        if upsample != config.samples_per_frame:
            raise ValueError(f"decode_upsample_rate {upsample} is not the decoder's upsampling "
                             f"{config.samples_per_frame} (prod(upsample_rates + upsampling_ratios))")
        return config

    @classmethod
    def from_folder(cls, folder: str | Path) -> Qwen3CodecConfig:
        return cls.from_tokenizer_dict(json.loads((Path(folder) / CONFIG_FILE).read_text()))
