"""LowPrecisionLinear: one-row products in float16, several rows in bfloat16 when asked, both
close to float32; everything else is unchanged."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from model.config import ModelConfig
from model.llama.low_precision_linear import LowPrecisionLinear, cpu_has_bf16_matmul, use_low_precision_linears


def linear(bias: bool = True) -> nn.Linear:
    torch.manual_seed(0)
    return nn.Linear(768, 256, bias=bias)


@pytest.mark.parametrize("bias", [True, False])
def test_one_row_is_close_to_float32_and_stays_float32(bias):
    plain = linear(bias)
    half = LowPrecisionLinear.from_linear(plain)
    x = torch.randn(1, 768)
    with torch.no_grad():
        expected, got = plain(x), half(x)
    assert got.dtype == torch.float32 and got.shape == expected.shape
    # The row and the result are each rounded to float16 once: ~1e-3 of the output's scale.
    assert (got - expected).abs().max() <= 2e-3 * expected.abs().max()
    assert not torch.equal(got, expected)  # the float16 path really ran


@pytest.mark.parametrize("shape", [(2, 768), (37, 768), (1, 3, 768)])
def test_several_rows_take_the_float32_path_exactly_unless_asked(shape):
    plain = linear()
    half = LowPrecisionLinear.from_linear(plain)
    x = torch.randn(*shape)
    with torch.no_grad():
        assert torch.equal(half(x), plain(x))


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("shape", [(2, 768), (37, 768), (1, 3, 768)])
def test_several_rows_in_bfloat16_are_close_to_float32_and_stay_float32(shape, bias):
    plain = linear(bias)
    rounded = LowPrecisionLinear.from_linear(plain, bf16_rows=True)
    x = torch.randn(*shape)
    with torch.no_grad():
        expected, got = plain(x), rounded(x)
    assert got.dtype == torch.float32 and got.shape == expected.shape
    # Rows, weights and result each rounded to bfloat16 once (8 bits of mantissa): ~1e-2.
    assert (got - expected).abs().max() <= 2e-2 * expected.abs().max()
    assert not torch.equal(got, expected)  # the bfloat16 path really ran


def test_other_dtypes_take_the_weights_path():
    rounded = LowPrecisionLinear.from_linear(linear(), bf16_rows=True)
    x = torch.randn(4, 768, dtype=torch.float64)
    with pytest.raises(RuntimeError):  # float32 weights, float64 rows: as nn.Linear would
        rounded(x)


def test_use_low_precision_linears_shares_parameters_and_keeps_the_state_dict():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Sequential(nn.Linear(16, 4, bias=False)))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    first = model[0].weight
    assert use_low_precision_linears(model, bf16_rows=True) == 2
    assert isinstance(model[0], LowPrecisionLinear) and isinstance(model[2][0], LowPrecisionLinear)
    assert model[0].weight is first and model[0].bf16_weight is not None
    assert model.state_dict().keys() == before.keys()  # the copies are not saved
    assert use_low_precision_linears(model) == 0  # already replaced


def test_only_float32_linears_are_replaced():
    model = nn.Sequential(nn.Linear(8, 8).to(torch.bfloat16))
    assert use_low_precision_linears(model) == 0
    with pytest.raises(ValueError, match="float32"):
        LowPrecisionLinear.from_linear(model[0])


def test_the_model_config_asks_for_bfloat16_rows_on_a_float32_cpu_model_only():
    assert ModelConfig(device="cpu", cpu_batch_precision="bfloat16").bf16_cpu_rows
    assert not ModelConfig(device="cpu", cpu_batch_precision="float32").bf16_cpu_rows
    assert not ModelConfig(device="cpu", dtype="bfloat16", cpu_batch_precision="bfloat16").bf16_cpu_rows
    assert ModelConfig(device="cpu").bf16_cpu_rows == cpu_has_bf16_matmul()
    with pytest.raises(ValueError, match="cpu_batch_precision"):
        ModelConfig(cpu_batch_precision="float16")
