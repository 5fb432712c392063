"""The 12 Hz codec encoder's transformer (Mimi's): pre-norm LayerNorm layers with RoPE causal
attention, a GELU MLP and a learned per-channel scale on each residual branch, no final norm.

It runs once over a whole clip at the convolutions' rate, positions 0..n-1, every position
attending to all earlier ones. Mimi's configuration carries a sliding window, but the reference
applies none here: transformers 4.57 builds Mimi a plain causal mask (measured on the tiny codec:
a window of 8 or of 1,000 positions, with or without a cache, gives the same codes of a 300-position
clip).
"""
from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from model.codecs.qwen3_12hz_config import Qwen3EncoderConfig
from model.codecs.qwen3_12hz_transformer import LayerScale, rotate


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention (grouped keys and values when there are fewer kv heads),
    queries and keys rotated at their positions; no biases."""

    def __init__(self, config: Qwen3EncoderConfig) -> None:
        super().__init__()
        hidden, self.head_dim = config.hidden_size, config.head_dim
        self.heads, self.kv_heads = config.num_attention_heads, config.num_key_value_heads
        self.q_proj = nn.Linear(hidden, self.heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(hidden, self.kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(hidden, self.kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.heads * self.head_dim, hidden, bias=False)

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        batch, n, _ = x.shape
        q = rotate(self.q_proj(x).view(batch, n, self.heads, self.head_dim).transpose(1, 2), cos, sin)
        k = rotate(self.k_proj(x).view(batch, n, self.kv_heads, self.head_dim).transpose(1, 2), cos, sin)
        v = self.v_proj(x).view(batch, n, self.kv_heads, self.head_dim).transpose(1, 2)
        groups = self.heads // self.kv_heads
        # NOTE: is_causal rather than a mask tensor: the reference's call, so the same kernel.
        y = F.scaled_dot_product_attention(q, k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1),
                                           is_causal=n > 1)
        return self.o_proj(y.transpose(1, 2).reshape(batch, n, -1))


class GeluMlp(nn.Module):
    """fc2(gelu(fc1(x))), no biases."""

    def __init__(self, hidden: int, intermediate: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(hidden, intermediate, bias=False)
        self.fc2 = nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(F.gelu(self.fc1(x)))


class EncoderLayer(nn.Module):
    """x + s_a * attn(norm(x)), then x + s_m * mlp(norm(x))."""

    def __init__(self, config: Qwen3EncoderConfig) -> None:
        super().__init__()
        hidden = config.hidden_size
        self.self_attn = CausalSelfAttention(config)
        self.mlp = GeluMlp(hidden, config.intermediate_size)
        self.input_layernorm = nn.LayerNorm(hidden, eps=config.norm_eps)
        self.post_attention_layernorm = nn.LayerNorm(hidden, eps=config.norm_eps)
        self.self_attn_layer_scale = LayerScale(hidden)
        self.mlp_layer_scale = LayerScale(hidden)

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        x = x + self.self_attn_layer_scale(self.self_attn(self.input_layernorm(x), cos, sin))
        return x + self.mlp_layer_scale(self.mlp(self.post_attention_layernorm(x)))


class EncoderTransformer(nn.Module):
    """[B, hidden, n] → [B, hidden, n], causal: position t depends on positions <= t only."""

    def __init__(self, config: Qwen3EncoderConfig) -> None:
        super().__init__()
        self.head_dim, self.rope_theta = config.head_dim, config.rope_theta
        self.layers = nn.ModuleList(EncoderLayer(config) for _ in range(config.num_hidden_layers))

    def forward(self, x: Tensor) -> Tensor:
        h = x.transpose(1, 2)
        cos, sin = self._rotation(h.shape[1], h)
        for layer in self.layers:
            h = layer(h, cos, sin)
        return h.transpose(1, 2)

    def _rotation(self, n: int, like: Tensor) -> tuple[Tensor, Tensor]:
        """cos, sin [1, 1, n, head_dim] of the default RoPE at positions 0..n-1, in float32."""
        exponents = torch.arange(0, self.head_dim, 2, device=like.device).float() / self.head_dim
        angles = torch.arange(n, device=like.device).float()[:, None] * (1.0 / self.rope_theta ** exponents)
        angles = torch.cat([angles, angles], dim=-1)[None, None]
        return angles.cos().to(like.dtype), angles.sin().to(like.dtype)
