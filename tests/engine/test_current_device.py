"""The engine core makes a GPU given with its index the current device (graphs and Triton run on
the current device), and leaves "cuda" alone (already current; set_device refuses it) and the CPU."""
from __future__ import annotations

import torch

from engine.core import make_current


def test_only_an_indexed_gpu_is_made_current(monkeypatch):
    calls = []
    monkeypatch.setattr(torch.cuda, "set_device", calls.append)
    for name in ("cpu", "cuda", "cuda:1"):
        make_current(torch.device(name))
    assert calls == [torch.device("cuda:1")]
