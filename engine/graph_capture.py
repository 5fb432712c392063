"""Capturing CUDA graphs: a grid of shapes in one memory pool (the decode step's batch sizes, the
codec's window and step graphs), each graph warmed up once before it records."""
from __future__ import annotations

import logging
import time
from typing import Any, Callable, Protocol, Sequence, TypeVar

import torch
from torch import Tensor

logger = logging.getLogger("chorus.engine")


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


def capture_grid(lengths: Sequence[int], batch_sizes: Sequence[int], run: Callable[[int, int], Any]
                 ) -> tuple[dict[tuple[int, int], torch.cuda.CUDAGraph], dict[tuple[int, int], Any]]:
    """A graph of `run(size, n)` for every batch size and length, in one memory pool, keyed
    (size, n); with the outputs their replays write."""
    graphs: dict[tuple[int, int], torch.cuda.CUDAGraph] = {}
    outputs: dict[tuple[int, int], Any] = {}
    pool = None
    # NOTE: largest first, so the smaller graphs reuse the memory the largest reserved in the pool.
    for n in sorted(lengths, reverse=True):
        for size in sorted(batch_sizes, reverse=True):
            graph, outputs[size, n] = capture_graph(lambda: run(size, n), pool)
            graphs[size, n], pool = graph, graph.pool()
    torch.cuda.synchronize()
    return graphs, outputs


class GraphGrid(Protocol):
    """Graphs of one function at `lengths` x `batch_sizes`, captured by `capture`."""

    lengths: list[int]
    batch_sizes: list[int]

    def capture(self) -> None: ...


Grid = TypeVar("Grid", bound=GraphGrid)


def captured(graphs: Grid, what: str) -> Grid:
    """`graphs` once captured (in inference mode), logged as `what` with its shapes and time."""
    started = time.perf_counter()
    with torch.inference_mode():
        graphs.capture()
    logger.info("captured %d %s (%s frames, batch %s) in %.1f s", len(graphs.lengths) * len(graphs.batch_sizes),
                what, graphs.lengths, graphs.batch_sizes, time.perf_counter() - started)
    return graphs
