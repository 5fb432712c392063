"""check_code_range (model/codecs/base.py): codes outside [0, codebook) are refused whether they
are checked on the host in Python (a frame or two, as the engine pushes them) or by a reduction."""
from __future__ import annotations

import pytest
import torch

from model.codecs.base import check_code_range


@pytest.mark.parametrize("rows", [1, 2, 40])  # 16 and 32 codes in Python, 640 by a reduction
def test_codes_outside_the_codebook_are_refused_on_either_path(rows):
    codes = torch.randint(0, 64, (rows, 16))
    check_code_range(codes, 64)
    for bad, shown in ((-1, r"\[-1, "), (64, r", 64\]")):
        wrong = codes.clone()
        wrong[rows - 1, 5] = bad
        with pytest.raises(ValueError, match=shown):
            check_code_range(wrong, 64)
    check_code_range(codes[:0], 64)  # nothing to check


@pytest.mark.parametrize("shape", [(16,), (2, 3, 16)])  # not [n, G]: read flat, still in Python
def test_codes_of_other_shapes_are_checked_too(shape):
    codes = torch.randint(0, 64, shape)
    check_code_range(codes, 64)
    wrong = codes.clone()
    wrong.view(-1)[-1] = 64
    with pytest.raises(ValueError, match=r", 64\]"):
        check_code_range(wrong, 64)


def test_float_codes_take_the_reduction_so_nan_is_refused():
    check_code_range(torch.tensor([[1.0, 2.0]]), 4)
    with pytest.raises(ValueError):
        check_code_range(torch.tensor([[1.0, float("nan")]]), 4)
