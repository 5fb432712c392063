"""The positions a step's forward reads: one per new token, chunk after chunk."""
from __future__ import annotations

from types import SimpleNamespace

import torch

from engine.runner.model_runner import token_positions


def chunk(start: int, end: int) -> SimpleNamespace:
    return SimpleNamespace(start=start, end=end)


def test_a_decode_step_has_each_rows_position():
    positions = token_positions([chunk(7, 8), chunk(0, 1), chunk(130, 131)])
    assert positions.dtype == torch.int64 and positions.tolist() == [7, 0, 130]


def test_prefill_chunks_give_their_ranges_in_order():
    positions = token_positions([chunk(5, 6), chunk(0, 4), chunk(12, 14)])
    assert positions.dtype == torch.int64 and positions.tolist() == [5, 0, 1, 2, 3, 12, 13]
