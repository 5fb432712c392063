"""CPU products against reduced-precision copies of a float32 linear's weights.

One row (a decode step of one stream) multiplies one row by every weight matrix of the model: on
the CPU that is bound by reading the weights from memory, not by arithmetic. Reading them as
float16 halves the bytes. Measured on the 2-core development machine (model/families/joe/README.md;
the joe student's 20 linears cycled so that they do not stay in cache): 0.7 ms per step in float16
against 1.4-1.8 ms in float32.

Several rows (a batch of streams, a prompt) are arithmetic-bound instead. This CPU has no float16
matrix kernel (a 37-row float16 product took 2.1 ms against 0.5 ms in float32), but oneDNN has
bfloat16 ones wherever the CPU has AVX-512 BF16 or AMX: measured at 16 rows of the joe student's
shapes, 61-80 us against 90-139 us in float32, casts of the rows included (1.4-1.7x; at 64 rows
1.6-1.9x). Without those instructions, several rows stay in float32.
"""
from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from torch import Tensor, nn


@functools.cache
def cpu_has_bf16_matmul() -> bool:
    """Whether oneDNN runs bfloat16 products on this CPU's own instructions (AVX-512 BF16, AMX),
    not emulated in float32 (slower than float32 itself)."""
    try:
        return bool(torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):  # a private op: a torch build without it keeps float32
        return False


class LowPrecisionLinear(nn.Linear):
    """An nn.Linear whose float32 CPU calls run on reduced-precision copies of its weight and bias:
    one row in float16, several rows (when `bf16_rows`) in bfloat16.

    Invariant: `weight`/`bias` stay the float32 parameters every other call uses (other dtypes,
    several rows without `bf16_rows`); the copies equal them rounded as of construction
    (inference only: nothing refreshes them after a weight update). Inputs and outputs stay
    float32: the rows are rounded on the way in (float16: ~5e-4 relative, bfloat16: ~4e-3), the
    product accumulates in float32 inside the kernel, and its result is rounded once more.
    """

    half_weight: Tensor
    half_bias: Tensor | None
    bf16_weight: Tensor | None
    bf16_bias: Tensor | None

    @classmethod
    def from_linear(cls, linear: nn.Linear, bf16_rows: bool = False) -> LowPrecisionLinear:
        if linear.weight.dtype != torch.float32:
            raise ValueError(f"expected a float32 linear, got {linear.weight.dtype}")
        module = cls.__new__(cls)
        nn.Module.__init__(module)
        module.in_features, module.out_features = linear.in_features, linear.out_features
        module.weight, module.bias = linear.weight, linear.bias  # shared, not copied
        for prefix, dtype, wanted in (("half", torch.float16, True), ("bf16", torch.bfloat16, bf16_rows)):
            weight = linear.weight.detach().to(dtype) if wanted else None
            bias = linear.bias.detach().to(dtype) if wanted and linear.bias is not None else None
            module.register_buffer(f"{prefix}_weight", weight, persistent=False)
            module.register_buffer(f"{prefix}_bias", bias, persistent=False)
        return module

    def forward(self, x: Tensor) -> Tensor:
        if x.dtype != torch.float32:
            return super().forward(x)
        if x.dim() == 2 and x.shape[0] == 1:
            return F.linear(x.half(), self.half_weight, self.half_bias).float()
        if self.bf16_weight is not None:
            return F.linear(x.bfloat16(), self.bf16_weight, self.bf16_bias).float()
        return super().forward(x)


def use_low_precision_linears(module: nn.Module, bf16_rows: bool = False) -> int:
    """Replaces every float32 CPU nn.Linear under `module` by a LowPrecisionLinear sharing its
    parameters (several rows in bfloat16 if `bf16_rows`); returns how many were replaced.
    Linears on other devices or dtypes stay."""
    replaced = 0
    for parent in module.modules():
        for name, child in list(parent.named_children()):
            if (type(child) is nn.Linear and child.weight.device.type == "cpu"
                    and child.weight.dtype == torch.float32):
                setattr(parent, name, LowPrecisionLinear.from_linear(child, bf16_rows))
                replaced += 1
    return replaced
