"""Building blocks of the Llama decoder, all operating on a flat token batch [T, ...]."""
from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from model.attention import AttentionBackend, AttentionMetadata
from model.llama.config import LlamaArchConfig


class RMSNorm(nn.Module):
    """Root-mean-square norm computed in float32 and cast back to the input dtype before the weight is applied."""

    def __init__(self, hidden_size: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.eps = eps

    def forward(self, hidden: Tensor) -> Tensor:
        return rms_norm(hidden, self.weight, self.eps)


def rms_norm(hidden: Tensor, weight: Tensor, eps: float) -> Tensor:
    """`hidden` normalised over its last dimension in float32, cast back, times `weight` (any shape
    that broadcasts against `hidden`, e.g. one row per head)."""
    if hidden.dtype == torch.float32 and weight.dtype == torch.float32:
        # One fused kernel (and a product for a weight per head) instead of seven small ops: the
        # same math when nothing is cast.
        if weight.dim() == 1:
            return F.rms_norm(hidden, weight.shape, weight, eps)
        return F.rms_norm(hidden, hidden.shape[-1:], None, eps).mul_(weight)
    hidden32 = hidden.float()
    normed = hidden32 * torch.rsqrt(hidden32.pow(2).mean(-1, keepdim=True) + eps)
    return weight * normed.to(hidden.dtype)


class RotaryEmbedding:
    """Rotary position embedding in the rotate-half layout (pairs are (i, i + head_dim/2)).

    Keeps one float32 table of [cos | sin] per position for positions [0, len) on the device it was last used
    on; the table starts at ``max_position_embeddings`` rows and doubles whenever a step needs more.
    """

    def __init__(self, head_dim: int, max_position_embeddings: int, theta: float,
                 scaling: dict[str, Any] | None) -> None:
        self.inv_freq = _inverse_frequencies(head_dim, theta, scaling)
        self.initial_positions = max_position_embeddings
        self._cos_sin: Tensor | None = None
        # Every layer of a step rotates at the same positions: the gathered rows are kept for the
        # positions tensor they came from (held, so its identity cannot be reused by a new one).
        self._step: tuple[Tensor, torch.dtype, Tensor, Tensor] | None = None

    def apply(self, positions: Tensor, query: Tensor, key: Tensor, num_positions: int) -> tuple[Tensor, Tensor]:
        return self.rotate(positions, query, num_positions), self.rotate(positions, key, num_positions)

    def rotate(self, positions: Tensor, heads: Tensor, num_positions: int) -> Tensor:
        """Rotates `heads` [T, any number of heads, head_dim] at `positions` [T]."""
        step = self._step
        if step is None or step[0] is not positions or step[1] != heads.dtype:
            # NOTE: the caller bounds positions by num_positions (python int) so growing never needs a device sync.
            cos, sin = self._table(num_positions, positions.device)[positions].to(heads.dtype).chunk(2, dim=-1)
            step = self._step = (positions, heads.dtype, cos[:, None, :], sin[:, None, :])
        return _rotate(heads, step[2], step[3])

    def _table(self, num_positions: int, device: torch.device) -> Tensor:
        table = self._cos_sin
        if table is None or table.device != device or table.shape[0] < num_positions:
            rows = max(num_positions, self.initial_positions if table is None else 2 * table.shape[0])
            freqs = torch.outer(torch.arange(rows, device=device, dtype=torch.float32), self.inv_freq.to(device))
            table = torch.cat((freqs.cos(), freqs.sin()), dim=-1)
            self._cos_sin = table
        return table


def _rotate(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    first, second = x.chunk(2, dim=-1)
    return torch.cat((first * cos - second * sin, second * cos + first * sin), dim=-1)


def _inverse_frequencies(head_dim: int, theta: float, scaling: dict[str, Any] | None) -> Tensor:
    # NOTE: explicit CPU device so that building the model under torch.device("meta") still gets real values.
    exponents = torch.arange(0, head_dim, 2, dtype=torch.int64, device="cpu").float() / head_dim
    inv_freq = 1.0 / theta ** exponents
    if scaling is None:
        return inv_freq
    # llama3: wavelengths longer than original_len / low_freq_factor are stretched by `factor`, those shorter
    # than original_len / high_freq_factor are kept, and the band between blends the two linearly.
    low, high = scaling["low_freq_factor"], scaling["high_freq_factor"]
    wavelengths = 2 * math.pi / inv_freq
    keep = ((scaling["original_max_position_embeddings"] / wavelengths - low) / (high - low)).clamp(0.0, 1.0)
    return (1 - keep) * inv_freq / scaling["factor"] + keep * inv_freq


class LlamaAttention(nn.Module):
    """Grouped-query self-attention with fused q/k/v rows ordered [q | k | v] and rotary positions;
    with `qk_norm` (Qwen3) each query and key head is RMS-normalised before it is rotated."""

    def __init__(self, config: LlamaArchConfig, attention: AttentionBackend, rotary: RotaryEmbedding) -> None:
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.num_kv_heads = config.num_key_value_heads
        self.head_dim = config.head_dim
        self.qkv_sizes = [self.num_heads * self.head_dim, *[self.num_kv_heads * self.head_dim] * 2]
        self.qkv_proj = nn.Linear(config.hidden_size, sum(self.qkv_sizes), bias=False)
        self.o_proj = nn.Linear(self.num_heads * self.head_dim, config.hidden_size, bias=False)
        self.attention = attention
        self.rotary = rotary
        self.scale = self.head_dim ** -0.5
        self.q_norm = RMSNorm(self.head_dim, config.rms_norm_eps) if config.qk_norm else None
        self.k_norm = RMSNorm(self.head_dim, config.rms_norm_eps) if config.qk_norm else None
        self._head_norms: tuple[tuple, Tensor] | None = None  # (the weights' versions, [q heads + kv heads, head_dim])

    def _head_norm_weights(self) -> Tensor:
        """q_norm's weight for each query head, then k_norm's for each key head: one norm of the
        joint heads instead of a split, two norms and a concatenation (four small ops a layer
        that a CPU decode step pays for). Rebuilt when a weight is loaded or moved."""
        q, k = self.q_norm.weight, self.k_norm.weight
        key = (q._version, k._version, q.data_ptr(), k.data_ptr(), q.dtype)
        if self._head_norms is None or self._head_norms[0] != key:
            joint = torch.cat((q.detach().expand(self.num_heads, -1), k.detach().expand(self.num_kv_heads, -1)))
            self._head_norms = (key, joint)
        return self._head_norms[1]

    def forward(self, hidden: Tensor, positions: Tensor, kv_cache: Tensor, meta: AttentionMetadata) -> Tensor:
        num_tokens = hidden.shape[0]
        # Queries and keys are adjacent rows of the fused projection: rotated as one tensor of
        # heads, which halves the rotary's small ops (they dominate a CPU decode step).
        query_key, value = self.qkv_proj(hidden).split([self.qkv_sizes[0] + self.qkv_sizes[1], self.qkv_sizes[2]], -1)
        query_key = query_key.view(num_tokens, self.num_heads + self.num_kv_heads, self.head_dim)
        if self.q_norm is not None:
            query_key = rms_norm(query_key, self._head_norm_weights(), self.q_norm.eps)
        query, key = self.rotary.rotate(positions, query_key, meta.max_seq_len).split(
            [self.num_heads, self.num_kv_heads], dim=1)
        value = value.view(num_tokens, self.num_kv_heads, self.head_dim)
        out = self.attention.forward(query, key, value, kv_cache, meta, self.scale)
        return self.o_proj(out.reshape(num_tokens, self.num_heads * self.head_dim))


class LlamaMLP(nn.Module):
    """SwiGLU feed-forward, down(silu(gate(x)) * up(x)), with fused rows ordered [gate | up]."""

    def __init__(self, hidden_size: int, intermediate_size: int) -> None:
        super().__init__()
        self.gate_up_proj = nn.Linear(hidden_size, 2 * intermediate_size, bias=False)
        self.down_proj = nn.Linear(intermediate_size, hidden_size, bias=False)

    def forward(self, hidden: Tensor) -> Tensor:
        gate, up = self.gate_up_proj(hidden).chunk(2, dim=-1)
        return self.down_proj(F.silu(gate) * up)


class LlamaDecoderLayer(nn.Module):
    """Pre-norm residual block: x + attn(norm(x)), then h + mlp(norm(h))."""

    def __init__(self, config: LlamaArchConfig, attention: AttentionBackend, rotary: RotaryEmbedding) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.self_attn = LlamaAttention(config, attention, rotary)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.mlp = LlamaMLP(config.hidden_size, config.intermediate_size)

    def forward(self, hidden: Tensor, positions: Tensor, kv_cache: Tensor, meta: AttentionMetadata) -> Tensor:
        hidden = hidden + self.self_attn(self.input_layernorm(hidden), positions, kv_cache, meta)
        return hidden + self.mlp(self.post_attention_layernorm(hidden))
