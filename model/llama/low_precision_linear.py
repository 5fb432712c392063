"""Single-row products against a float16 copy of the weights, for CPU decode at batch 1.

A decode step of one stream multiplies one row by every weight matrix of the model: on the CPU
that is bound by reading the weights from memory, not by arithmetic. Reading them as float16 halves
the bytes. Measured on the 2-core development machine (model/families/joe/README.md; the joe
student's 20 linears cycled so that they do not stay in cache): 0.7 ms per step in float16
against 1.4-1.8 ms in float32. Rows > 1 keep the float32 path: this CPU has no float16 matrix
kernel, and a 37-row float16 product took 2.1 ms against 0.5 ms in float32.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class HalfGemvLinear(nn.Linear):
    """An nn.Linear whose one-row calls use float16 copies of its weight and bias.

    Invariant: `weight`/`bias` stay the float32 parameters every other call uses; `half_weight`
    and `half_bias` equal them rounded to float16 as of construction (inference only: nothing
    refreshes the copies after a weight update). Inputs and outputs of a one-row call are float32;
    the row is rounded to float16 on the way in (about 5e-4 relative), and the product accumulates
    in float32 inside the kernel before its result is rounded to float16 once more.
    """

    half_weight: Tensor
    half_bias: Tensor | None

    @classmethod
    def from_linear(cls, linear: nn.Linear) -> HalfGemvLinear:
        if linear.weight.dtype != torch.float32:
            raise ValueError(f"expected a float32 linear, got {linear.weight.dtype}")
        module = cls.__new__(cls)
        nn.Module.__init__(module)
        module.in_features, module.out_features = linear.in_features, linear.out_features
        module.weight, module.bias = linear.weight, linear.bias  # shared, not copied
        module.register_buffer("half_weight", linear.weight.detach().half(), persistent=False)
        half_bias = None if linear.bias is None else linear.bias.detach().half()
        module.register_buffer("half_bias", half_bias, persistent=False)
        return module

    def forward(self, x: Tensor) -> Tensor:
        if x.dim() == 2 and x.shape[0] == 1 and x.dtype == torch.float32:
            return F.linear(x.half(), self.half_weight, self.half_bias).float()
        return super().forward(x)


def use_half_gemv(module: nn.Module) -> int:
    """Replaces every float32 CPU nn.Linear under `module` by a HalfGemvLinear sharing its
    parameters; returns how many were replaced. Linears on other devices or dtypes stay."""
    replaced = 0
    for parent in module.modules():
        for name, child in list(parent.named_children()):
            if (type(child) is nn.Linear and child.weight.device.type == "cpu"
                    and child.weight.dtype == torch.float32):
                setattr(parent, name, HalfGemvLinear.from_linear(child))
                replaced += 1
    return replaced
