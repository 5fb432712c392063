"""The GPU benchmark's CUDA graph batch sizes (its `--tiny` run end to end is
tests/benchmarks/live/test_gpu_bench_tiny.py's)."""
from __future__ import annotations

import pytest

from engine.gpu_config import GpuConfig


def test_graph_batch_sizes_pad_every_batch_up_to_max_num_seqs():
    assert GpuConfig().graph_batch_sizes(256)[:6] == [1, 2, 4, 8, 16, 32]
    assert GpuConfig().graph_batch_sizes(256)[-1] == 256
    assert GpuConfig(graph_batch_step=8).graph_batch_sizes(20) == [1, 2, 4, 8, 16, 20]
    assert GpuConfig().graph_batch_sizes(3) == [1, 2, 3]
    with pytest.raises(ValueError):
        GpuConfig(graph_batch_step=12)
