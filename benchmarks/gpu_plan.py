"""The sizes of one GPU benchmark run (`Plan`), shared by the benchmark's steps (gpu_bench.py) and its
load sweeps (gpu_load.py); the two plans themselves (FULL, TINY_PLAN) are in gpu_bench.py."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from benchmarks.gpu_checkpoint import LlamaShape


@dataclass(slots=True, frozen=True)
class Plan:
    """Sizes of one run: `tiny` runs on the CPU with the reference attention and no graphs."""

    shape: LlamaShape
    device: torch.device
    attention: str
    decode_batches: tuple[int, ...]
    decode_context: int
    concurrency: tuple[int, ...]
    baseline_concurrency: tuple[int, ...]
    frames_per_request: int
    requests_per_client: int
    fusion_batches: tuple[int, ...]
    prefill_backends: tuple[str, ...]
    prefill: tuple[int, int, int]  # sequences, new tokens each, cached tokens each
    block_size: int = 16

    @property
    def tiny(self) -> bool:
        return self.device.type == "cpu"
