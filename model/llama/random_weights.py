"""Seeded random Llama weights under Hugging Face names, for test and benchmark checkpoints."""
from __future__ import annotations

import torch


def random_llama_weights(
    *,
    vocab_size: int,
    hidden_size: int,
    intermediate_size: int,
    num_hidden_layers: int,
    num_key_value_heads: int,
    head_dim: int,
    seed: int,
    std: float = 0.02,
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float32,
) -> dict[str, torch.Tensor]:
    """Normal(0, std) matrices and unit norms, drawn on `device` (fast for GPU-sized models) and
    returned on the CPU, where safetensors writes from. Same seed, device and dtype: same weights.
    A small std keeps a deep random stack's activations finite in bf16."""
    gen = torch.Generator(device=device).manual_seed(seed)
    kv = num_key_value_heads * head_dim
    hidden, inter = hidden_size, intermediate_size

    def normal(*size: int) -> torch.Tensor:
        return (torch.randn(*size, generator=gen, device=device, dtype=dtype) * std).cpu()

    def ones() -> torch.Tensor:
        return torch.ones(hidden, dtype=dtype)

    weights = {"model.embed_tokens.weight": normal(vocab_size, hidden), "model.norm.weight": ones()}
    for i in range(num_hidden_layers):
        pre = f"model.layers.{i}."
        weights |= {
            pre + "self_attn.q_proj.weight": normal(hidden, hidden),
            pre + "self_attn.k_proj.weight": normal(kv, hidden),
            pre + "self_attn.v_proj.weight": normal(kv, hidden),
            pre + "self_attn.o_proj.weight": normal(hidden, hidden),
            pre + "mlp.gate_proj.weight": normal(inter, hidden),
            pre + "mlp.up_proj.weight": normal(inter, hidden),
            pre + "mlp.down_proj.weight": normal(hidden, inter),
            pre + "input_layernorm.weight": ones(),
            pre + "post_attention_layernorm.weight": ones(),
        }
    return weights
