"""Capturing one CUDA graph: shared by the decode graphs and the codec's window graphs."""
from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor


def capture_graph(run: Callable[[], Tensor], pool: tuple | None) -> tuple[torch.cuda.CUDAGraph, Tensor]:
    """`run` once eagerly (whatever it sets up on first use, e.g. kernel compilation or selection,
    must not happen while capturing), then captured into a graph in memory `pool` (None: a new
    pool); returns the graph and the output tensor its replays write."""
    run()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, pool=pool):
        output = run()
    return graph, output
