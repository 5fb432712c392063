"""The fused Triton kernels (under the interpreter on the CPU) against the PyTorch ops they replace, and a
model's fused layers (`LlamaModel.fuse_ops`) against its plain ones over the same weights."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from model.attention import AttentionMetadata, get_attention_backend
from model.llama.config import LlamaArchConfig
from model.llama.fused import FusedDecoderLayer, add_rms_norm, silu_and_mul
from model.llama.layers import RMSNorm
from model.llama.model import LlamaModel

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
# bf16: the fused kernels round once where the unfused ops round twice, and Triton's interpreter rounds
# float32 to bf16 towards zero (the GPU rounds to nearest), so results may differ by a few bf16 ulps
# (2^-8 relative each).
TOLERANCE = {torch.float32: 1e-5, torch.bfloat16: 4 * 2**-8}
EXACT_BF16 = DEVICE == "cuda"


def rand(*shape, dtype, seed):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator).to(device=DEVICE, dtype=dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("hidden", [48, 64])
def test_add_rms_norm_matches_add_then_rms_norm(dtype, hidden):
    x, residual = rand(5, hidden, dtype=dtype, seed=1), rand(5, hidden, dtype=dtype, seed=2)
    norm = RMSNorm(hidden, 1e-5).to(DEVICE)
    with torch.no_grad():
        norm.weight.copy_(rand(hidden, dtype=torch.float32, seed=3))
    norm = norm.to(dtype)
    normed, summed = add_rms_norm(x, residual, norm.weight, norm.eps)
    expected_sum = x + residual
    if dtype == torch.float32 or EXACT_BF16:
        assert torch.equal(summed, expected_sum)
    else:
        torch.testing.assert_close(summed, expected_sum, atol=0, rtol=2**-7)
    with torch.no_grad():
        expected = norm(expected_sum)
    torch.testing.assert_close(normed.float(), expected.float(), atol=TOLERANCE[dtype], rtol=TOLERANCE[dtype])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("width,block", [(40, 16), (64, 1024)])
def test_silu_and_mul_matches_torch(dtype, width, block):
    gate_up = rand(3, 2 * width, dtype=dtype, seed=4) * 3
    gate, up = gate_up.float().chunk(2, dim=-1)
    out = silu_and_mul(gate_up, block=block)
    assert out.shape == (3, width) and out.dtype == dtype
    torch.testing.assert_close(out.float(), F.silu(gate) * up, atol=TOLERANCE[dtype], rtol=TOLERANCE[dtype])


def test_fuse_ops_swaps_every_layer_for_an_equal_one_over_the_same_weights():
    config = LlamaArchConfig(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                             num_key_value_heads=2, head_dim=16, vocab_size=32, max_position_embeddings=64)
    torch.manual_seed(0)
    model = LlamaModel(config, get_attention_backend("torch")).to(DEVICE)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_(0, 0.2)
    names = sorted(name for name, _ in model.named_parameters())
    embeds = rand(7, 64, dtype=torch.float32, seed=5)
    positions = torch.arange(7, device=DEVICE)

    def run():
        caches = [torch.zeros(2, 2, 16, 2, 16, device=DEVICE) for _ in model.layers]
        meta = AttentionMetadata.build([7], [0], [[1]], 16, device=DEVICE)
        with torch.no_grad():
            return model(embeds, positions, caches, meta)

    plain = run()
    model.fuse_ops()
    assert all(isinstance(layer, FusedDecoderLayer) for layer in model.layers)
    assert sorted(name for name, _ in model.named_parameters()) == names
    torch.testing.assert_close(run(), plain, atol=1e-5, rtol=1e-5)
