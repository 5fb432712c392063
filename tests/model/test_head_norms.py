"""Qwen3's per-head query and key norms, applied as one norm over the joint heads (LlamaAttention),
against each norm applied to its own heads, and after the weights change."""
from __future__ import annotations

import pytest
import torch

from model.llama.config import LlamaArchConfig
from model.llama.layers import LlamaAttention, RMSNorm, RotaryEmbedding, rms_norm

HEADS, KV_HEADS, HEAD_DIM = 4, 2, 16


def attention() -> LlamaAttention:
    config = LlamaArchConfig(hidden_size=64, intermediate_size=96, num_hidden_layers=1, num_attention_heads=HEADS,
                             num_key_value_heads=KV_HEADS, head_dim=HEAD_DIM, vocab_size=32,
                             max_position_embeddings=64, qk_norm=True)
    layer = LlamaAttention(config, attention=None, rotary=RotaryEmbedding(HEAD_DIM, 64, 10000.0, None))
    with torch.no_grad():
        layer.q_norm.weight.copy_(torch.randn(HEAD_DIM, generator=torch.Generator().manual_seed(1)))
        layer.k_norm.weight.copy_(torch.randn(HEAD_DIM, generator=torch.Generator().manual_seed(2)))
    return layer


def separately(layer: LlamaAttention, heads: torch.Tensor) -> torch.Tensor:
    query, key = heads.split([HEADS, KV_HEADS], dim=1)
    return torch.cat((layer.q_norm(query), layer.k_norm(key)), dim=1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_one_norm_of_the_joint_heads_equals_each_heads_own_norm(dtype):
    layer = attention().to(dtype)
    heads = torch.randn(5, HEADS + KV_HEADS, HEAD_DIM, generator=torch.Generator().manual_seed(3)).to(dtype) * 3
    joint = rms_norm(heads, layer._head_norm_weights(), layer.q_norm.eps)
    assert joint.dtype == dtype
    assert torch.equal(joint, separately(layer, heads))


def test_the_joint_weights_follow_a_load_into_the_norms():
    layer = attention()
    heads = torch.randn(3, HEADS + KV_HEADS, HEAD_DIM)
    before = layer._head_norm_weights().clone()
    with torch.no_grad():  # as a checkpoint load writes them: in place
        layer.k_norm.weight.mul_(-2.0)
    after = layer._head_norm_weights()
    assert torch.equal(after[:HEADS], before[:HEADS]) and torch.equal(after[HEADS:], -2.0 * before[HEADS:])
    assert torch.equal(rms_norm(heads, after, layer.q_norm.eps), separately(layer, heads))


def test_a_weight_per_row_is_the_plain_norm_times_that_row():
    norm = RMSNorm(HEAD_DIM, 1e-6)
    hidden = torch.randn(2, 3, HEAD_DIM)
    weights = torch.randn(3, HEAD_DIM)
    expected = torch.stack([norm(hidden[:, row]) * weights[row] for row in range(3)], dim=1)
    torch.testing.assert_close(rms_norm(hidden, weights, 1e-6), expected, rtol=1e-6, atol=1e-6)
