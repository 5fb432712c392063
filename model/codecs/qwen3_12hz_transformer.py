"""The 12 Hz codec decoder's pre-transformer: a causal sliding-window transformer at the frame
rate (pre-norm RMSNorm, RoPE, SwiGLU, a learned per-channel scale on each residual branch).

It runs on pieces of a stream: every layer keeps the keys and values (keys already rotated at
their absolute positions) of the `sliding_window - 1` positions before the piece, which is all a
query of the piece can see besides the piece itself. Positions before the stream's first frame
hold nothing and are masked. A whole decode is the piece [0, n) after an empty window.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from model.codecs.qwen3_12hz_config import Qwen3CodecConfig
from model.llama.layers import RMSNorm


class LayerScale(nn.Module):
    """A learned per-channel factor on a residual branch."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(channels))

    def forward(self, x: Tensor) -> Tensor:
        return self.scale * x


class SwiGluMlp(nn.Module):
    """down(silu(gate(x)) * up(x)), no biases."""

    def __init__(self, hidden: int, intermediate: int) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(hidden, intermediate, bias=False)
        self.up_proj = nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


def rotate(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """RoPE in the half-split layout (dims i and i + D/2 form a pair), x [B, H, n, D]."""
    first, second = x.chunk(2, dim=-1)
    return x * cos + torch.cat([-second, first], dim=-1) * sin


class WindowAttention(nn.Module):
    """Multi-head attention (grouped keys and values when there are fewer kv heads) of a piece's
    queries over the window's past keys and values followed by the piece's own."""

    def __init__(self, config: Qwen3CodecConfig) -> None:
        super().__init__()
        self.heads, self.kv_heads = config.num_attention_heads, config.num_key_value_heads
        self.head_dim = config.head_dim
        self.q_proj = nn.Linear(config.hidden_size, self.heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(config.hidden_size, self.kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(config.hidden_size, self.kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.heads * self.head_dim, config.hidden_size, bias=False)

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor, past_keys: Tensor, past_values: Tensor,
                visible: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """x [B, n, hidden]; past_* [B, kv_heads, P, D]; visible [B, 1, n, P + n] → (y [B, n,
        hidden], keys and values [B, kv_heads, P + n, D])."""
        batch, n, _ = x.shape
        q = rotate(self.q_proj(x).view(batch, n, self.heads, self.head_dim).transpose(1, 2), cos, sin)
        k = rotate(self.k_proj(x).view(batch, n, self.kv_heads, self.head_dim).transpose(1, 2), cos, sin)
        v = self.v_proj(x).view(batch, n, self.kv_heads, self.head_dim).transpose(1, 2)
        keys, values = torch.cat([past_keys, k], dim=2), torch.cat([past_values, v], dim=2)
        groups = self.heads // self.kv_heads
        # Query head h reads kv head h // groups.
        y = F.scaled_dot_product_attention(q, keys.repeat_interleave(groups, dim=1),
                                           values.repeat_interleave(groups, dim=1), attn_mask=visible)
        return self.o_proj(y.transpose(1, 2).reshape(batch, n, -1)), keys, values


class TransformerLayer(nn.Module):
    """x + s_a * attn(norm(x)), then x + s_m * mlp(norm(x))."""

    def __init__(self, config: Qwen3CodecConfig) -> None:
        super().__init__()
        self.self_attn = WindowAttention(config)
        self.mlp = SwiGluMlp(config.hidden_size, config.intermediate_size)
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.self_attn_layer_scale = LayerScale(config.hidden_size)
        self.mlp_layer_scale = LayerScale(config.hidden_size)

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor, past_keys: Tensor, past_values: Tensor,
                visible: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        attended, keys, values = self.self_attn(self.input_layernorm(x), cos, sin, past_keys, past_values, visible)
        x = x + self.self_attn_layer_scale(attended)
        x = x + self.mlp_layer_scale(self.mlp(self.post_attention_layernorm(x)))
        return x, keys, values


class SlidingWindowTransformer(nn.Module):
    """latent → hidden → layers → norm → latent, one position per frame. Invariant: a stream's
    output for frame t depends on frames (t - window, t] through every layer's keys, exactly as
    the whole decode's sliding-window mask has it, whatever pieces the frames came in."""

    def __init__(self, config: Qwen3CodecConfig) -> None:
        super().__init__()
        self.window, self.past = config.sliding_window, config.past_positions
        self.head_dim, self.rope_theta = config.head_dim, config.rope_theta
        self.layers = nn.ModuleList(TransformerLayer(config) for _ in range(config.num_hidden_layers))
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.input_proj = nn.Linear(config.latent_dim, config.hidden_size)
        self.output_proj = nn.Linear(config.hidden_size, config.latent_dim)

    def window_shape(self) -> tuple[int, int, int, int]:
        """One stream's keys (or values): [layers, kv_heads, sliding_window - 1, head_dim]."""
        attention = self.layers[0].self_attn
        return len(self.layers), attention.kv_heads, self.past, self.head_dim

    def forward(self, x: Tensor, start: Tensor, keys: Tensor, values: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """x [B, n, latent] at positions start[b] + [0, n); keys, values [B, *window_shape()] of
        positions start[b] - P + [0, P) → (y [B, n, latent], keys', values' of the P positions
        before start[b] + n)."""
        n = x.shape[1]
        positions = start[:, None] + torch.arange(n, device=x.device)  # [B, n]
        cos, sin = self._rotation(positions, x.dtype)
        key_positions = start[:, None] - self.past + torch.arange(self.past + n, device=x.device)  # [B, P + n]
        offset = key_positions[:, None, :] - positions[:, :, None]
        # A query sees itself and the window - 1 positions before it, none before the stream began.
        visible = ((offset <= 0) & (offset > -self.window) & (key_positions[:, None, :] >= 0))[:, None]
        h = self.input_proj(x)
        new_keys, new_values = [], []
        for i, layer in enumerate(self.layers):
            h, layer_keys, layer_values = layer(h, cos, sin, keys[:, i], values[:, i], visible)
            new_keys.append(layer_keys[:, :, n:])
            new_values.append(layer_values[:, :, n:])
        return self.output_proj(self.norm(h)), torch.stack(new_keys, dim=1), torch.stack(new_values, dim=1)

    def _rotation(self, positions: Tensor, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
        """cos, sin [B, 1, n, D] of the default RoPE at `positions`, computed in float32."""
        pairs = torch.arange(0, self.head_dim, 2, dtype=torch.int64, device=positions.device)
        exponents = pairs.float() / self.head_dim
        inverse_frequency = 1.0 / (self.rope_theta ** exponents)
        angles = positions.float()[..., None] * inverse_frequency
        angles = torch.cat([angles, angles], dim=-1)[:, None]
        return angles.cos().to(dtype), angles.sin().to(dtype)
