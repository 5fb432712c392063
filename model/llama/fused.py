"""Fused Triton kernels for the Llama decoder (RMSNorm + residual add, SiLU-and-multiply) and the layer
that uses them; off unless `GpuConfig.fused_ops` asks for them (each must earn its place on the H200)."""
from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor, nn

from model.attention import AttentionMetadata
from model.llama.layers import LlamaDecoderLayer


@triton.jit
def _add_rms_norm_kernel(
    x_ptr, residual_ptr, weight_ptr, normed_ptr, summed_ptr, stride_x, stride_residual, eps,
    HIDDEN: tl.constexpr, BLOCK: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < HIDDEN
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0)
    residual = tl.load(residual_ptr + row * stride_residual + cols, mask=mask, other=0.0)
    # NOTE: the sum is rounded to the activation dtype before the norm, as the unfused `hidden + attn` is;
    # arithmetic is spelled in float32, which is what half-precision adds and multiplies do anyway.
    summed = (x.to(tl.float32) + residual.to(tl.float32)).to(x.dtype)
    tl.store(summed_ptr + row * HIDDEN + cols, summed, mask=mask)
    summed32 = summed.to(tl.float32)
    inverse_rms = 1.0 / tl.sqrt(tl.sum(summed32 * summed32, axis=0) / HIDDEN + eps)
    normed = (summed32 * inverse_rms).to(x.dtype).to(tl.float32)
    weight = tl.load(weight_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(normed_ptr + row * HIDDEN + cols, (weight * normed).to(x.dtype), mask=mask)


def add_rms_norm(x: Tensor, residual: Tensor, weight: Tensor, eps: float) -> tuple[Tensor, Tensor]:
    """(rms_norm(x + residual) * weight, x + residual) for [T, H] rows in one pass over memory."""
    num_tokens, hidden = x.shape
    if x.stride(-1) != 1 or residual.stride(-1) != 1 or residual.shape != x.shape:
        raise ValueError("add_rms_norm needs two [T, H] inputs with unit-stride rows")
    normed, summed = torch.empty_like(x), torch.empty_like(x)
    if num_tokens:
        _add_rms_norm_kernel[(num_tokens,)](
            x, residual, weight, normed, summed, x.stride(0), residual.stride(0), eps,
            HIDDEN=hidden, BLOCK=triton.next_power_of_2(hidden),
        )
    return normed, summed


@triton.jit
def _silu_and_mul_kernel(gate_up_ptr, out_ptr, stride_gate_up, WIDTH: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < WIDTH
    gate = tl.load(gate_up_ptr + row * stride_gate_up + cols, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(gate_up_ptr + row * stride_gate_up + WIDTH + cols, mask=mask, other=0.0).to(tl.float32)
    out = gate / (1.0 + tl.exp(-gate)) * up
    tl.store(out_ptr + row * WIDTH + cols, out.to(out_ptr.dtype.element_ty), mask=mask)


def silu_and_mul(gate_up: Tensor, block: int = 1024) -> Tensor:
    """silu(gate) * up for rows [gate | up] of [T, 2I], in float32, rounded once to the input dtype."""
    num_tokens, double_width = gate_up.shape
    if gate_up.stride(-1) != 1 or double_width % 2:
        raise ValueError("silu_and_mul needs [T, 2I] rows with unit stride")
    width = double_width // 2
    out = gate_up.new_empty(num_tokens, width)
    block = min(block, triton.next_power_of_2(width))
    if num_tokens:
        _silu_and_mul_kernel[(num_tokens, triton.cdiv(width, block))](
            gate_up, out, gate_up.stride(0), WIDTH=width, BLOCK=block
        )
    return out


class FusedDecoderLayer(nn.Module):
    """The same block as LlamaDecoderLayer over the same parameters (same names, so weights and graphs see
    no difference): the attention output's residual add is fused with the second norm, and the MLP's
    activation with its gating product."""

    def __init__(self, layer: LlamaDecoderLayer) -> None:
        super().__init__()
        self.input_layernorm = layer.input_layernorm
        self.self_attn = layer.self_attn
        self.post_attention_layernorm = layer.post_attention_layernorm
        self.mlp = layer.mlp

    def forward(self, hidden: Tensor, positions: Tensor, kv_cache: Tensor, meta: AttentionMetadata) -> Tensor:
        attended = self.self_attn(self.input_layernorm(hidden), positions, kv_cache, meta)
        norm = self.post_attention_layernorm
        normed, hidden = add_rms_norm(attended, hidden, norm.weight, norm.eps)
        activated = silu_and_mul(self.mlp.gate_up_proj(normed))
        return hidden + self.mlp.down_proj(activated)


def fuse_decoder_layers(layers: nn.ModuleList) -> None:
    """Swaps every plain decoder layer for its fused form in place; parameters are shared, not copied."""
    for index, layer in enumerate(layers):
        if isinstance(layer, LlamaDecoderLayer):
            layers[index] = FusedDecoderLayer(layer)
