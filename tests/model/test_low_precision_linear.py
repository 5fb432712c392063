"""HalfGemvLinear: one-row products in float16 stay close to float32; everything else is unchanged."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from model.llama.half_gemv import HalfGemvLinear, use_half_gemv


def linear(bias: bool = True) -> nn.Linear:
    torch.manual_seed(0)
    return nn.Linear(768, 256, bias=bias)


@pytest.mark.parametrize("bias", [True, False])
def test_one_row_is_close_to_float32_and_stays_float32(bias):
    plain = linear(bias)
    half = HalfGemvLinear.from_linear(plain)
    x = torch.randn(1, 768)
    with torch.no_grad():
        expected, got = plain(x), half(x)
    assert got.dtype == torch.float32 and got.shape == expected.shape
    # The row and the result are each rounded to float16 once: ~1e-3 of the output's scale.
    assert (got - expected).abs().max() <= 2e-3 * expected.abs().max()
    assert not torch.equal(got, expected)  # the float16 path really ran


@pytest.mark.parametrize("shape", [(2, 768), (37, 768), (1, 3, 768)])
def test_other_shapes_take_the_float32_path_exactly(shape):
    plain = linear()
    half = HalfGemvLinear.from_linear(plain)
    x = torch.randn(*shape)
    with torch.no_grad():
        assert torch.equal(half(x), plain(x))


def test_use_half_gemv_shares_parameters_and_keeps_the_state_dict():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Sequential(nn.Linear(16, 4, bias=False)))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    first = model[0].weight
    assert use_half_gemv(model) == 2
    assert isinstance(model[0], HalfGemvLinear) and isinstance(model[2][0], HalfGemvLinear)
    assert model[0].weight is first
    assert model.state_dict().keys() == before.keys()  # the float16 copies are not saved
    assert use_half_gemv(model) == 0  # already replaced


def test_only_float32_linears_are_replaced():
    model = nn.Sequential(nn.Linear(8, 8).to(torch.bfloat16))
    assert use_half_gemv(model) == 0
    with pytest.raises(ValueError, match="float32"):
        HalfGemvLinear.from_linear(model[0])
