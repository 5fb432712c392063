"""Architecture hyper-parameters of a Llama-style decoder, read from a Hugging Face config dict."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

_LLAMA3_SCALING_KEYS = ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")

# NOTE: hand-written or trimmed config.json files may omit keys; a missing key means LlamaConfig's default.
_HF_DEFAULTS: dict[str, Any] = {
    "vocab_size": 32000,
    "hidden_size": 4096,
    "intermediate_size": 11008,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "max_position_embeddings": 2048,
    "rms_norm_eps": 1e-6,
    "tie_word_embeddings": False,
    "rope_theta": 10000.0,
}

# Features of the Hugging Face Llama that this implementation does not have, with the only value it accepts.
_UNSUPPORTED_UNLESS: dict[str, Any] = {
    "hidden_act": "silu",
    "attention_bias": False,
    "mlp_bias": False,
    "partial_rotary_factor": 1.0,
}

_ARCH_KEYS = (
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "max_position_embeddings", "rope_theta", "rope_scaling", "rope_parameters",
    "rms_norm_eps", "tie_word_embeddings",
)


@dataclass(slots=True)
class LlamaArchConfig:
    """A consistent Llama architecture: heads divide evenly into key/value groups, and ``rope_scaling`` is None
    or a llama3 scaling dict with all of its parameters (key ``rope_type``; ``rope_theta`` lives in its own field).
    """

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int = 0
    max_position_embeddings: int = 2048
    rope_theta: float = 10000.0
    rope_scaling: dict[str, Any] | None = None
    rms_norm_eps: float = 1e-6
    tie_word_embeddings: bool = False
    # Qwen3: each head's queries and keys are RMS-normalised (own weights) before the rotation.
    qk_norm: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        positive = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                    "num_key_value_heads", "max_position_embeddings")
        for name in positive:
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.head_dim == 0:
            self.head_dim = self.hidden_size // self.num_attention_heads
        if self.head_dim <= 0:
            raise ValueError(f"head_dim must be positive, got {self.head_dim}")
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError("num_attention_heads must be a multiple of num_key_value_heads")
        if self.head_dim % 2:
            raise ValueError("head_dim must be even for rotary embeddings")
        if self.rope_theta <= 0 or self.rms_norm_eps <= 0:
            raise ValueError("rope_theta and rms_norm_eps must be positive")
        self.rope_scaling = _normalized_rope_scaling(self.rope_scaling)

    @classmethod
    def from_hf_dict(cls, d: dict[str, Any]) -> LlamaArchConfig:
        for key, accepted in _UNSUPPORTED_UNLESS.items():
            if d.get(key, accepted) != accepted:
                raise ValueError(f"unsupported Llama variant: {key}={d[key]!r} (only {accepted!r})")
        values = {**_HF_DEFAULTS, **{k: v for k, v in d.items() if k in _ARCH_KEYS and v is not None}}
        # NOTE: transformers 5 folds rope_theta and the scaling dict into one rope_parameters dict.
        rope_parameters = dict(values.pop("rope_parameters", None) or {})
        rope_theta = rope_parameters.pop("rope_theta", values["rope_theta"])
        rope_scaling = values.get("rope_scaling") or rope_parameters or None
        return cls(
            vocab_size=values["vocab_size"],
            hidden_size=values["hidden_size"],
            intermediate_size=values["intermediate_size"],
            num_hidden_layers=values["num_hidden_layers"],
            num_attention_heads=values["num_attention_heads"],
            num_key_value_heads=values.get("num_key_value_heads", values["num_attention_heads"]),
            head_dim=values.get("head_dim", 0),
            max_position_embeddings=values["max_position_embeddings"],
            rope_theta=float(rope_theta),
            rope_scaling=rope_scaling,
            rms_norm_eps=float(values["rms_norm_eps"]),
            tie_word_embeddings=bool(values["tie_word_embeddings"]),
            extra={k: v for k, v in d.items() if k not in _ARCH_KEYS},
        )


def _normalized_rope_scaling(scaling: dict[str, Any] | None) -> dict[str, Any] | None:
    """None for plain RoPE, else a checked llama3 dict keyed by ``rope_type`` (older configs spell it ``type``)."""
    if not scaling:
        return None
    if scaling.get("partial_rotary_factor", 1.0) != 1.0:
        raise ValueError("unsupported Llama variant: partial_rotary_factor != 1")
    rope_type = scaling.get("rope_type", scaling.get("type", "default"))
    if rope_type == "default":
        return None
    if rope_type != "llama3":
        raise ValueError(f"unsupported rope_scaling type {rope_type!r}; supported: 'default', 'llama3'")
    missing = [key for key in _LLAMA3_SCALING_KEYS if key not in scaling]
    if missing:
        raise ValueError(f"llama3 rope_scaling lacks {missing}")
    normalized = {key: float(scaling[key]) for key in _LLAMA3_SCALING_KEYS}
    normalized["original_max_position_embeddings"] = int(scaling["original_max_position_embeddings"])
    if normalized["factor"] <= 0 or normalized["original_max_position_embeddings"] <= 0:
        raise ValueError("llama3 rope_scaling needs a positive factor and original_max_position_embeddings")
    if not 0 < normalized["low_freq_factor"] < normalized["high_freq_factor"]:
        raise ValueError("llama3 rope_scaling needs 0 < low_freq_factor < high_freq_factor")
    return {"rope_type": "llama3", **normalized}
