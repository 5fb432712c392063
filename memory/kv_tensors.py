"""The KV cache tensors themselves, and how many blocks of them fit in a memory budget."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from memory.config import CacheConfig


@dataclass(slots=True, frozen=True)
class KVLayout:
    """Shape of one layer's cache: [2 (K, V), num_blocks, block_size, num_kv_heads, head_dim]."""

    num_layers: int
    num_kv_heads: int
    head_dim: int
    block_size: int
    dtype: torch.dtype

    @property
    def bytes_per_block(self) -> int:
        elem = torch.empty((), dtype=self.dtype).element_size()
        return 2 * self.num_layers * self.block_size * self.num_kv_heads * self.head_dim * elem

    def allocate(self, num_blocks: int, device: torch.device | str) -> list[torch.Tensor]:
        # NOTE: zeros, not empty: padding slots of a block table are read (then masked) by the
        # reference backend, and NaN garbage times a zero weight is still NaN.
        return [
            torch.zeros(
                (2, num_blocks, self.block_size, self.num_kv_heads, self.head_dim),
                dtype=self.dtype,
                device=device,
            )
            for _ in range(self.num_layers)
        ]


def kv_cache_dtype(config: CacheConfig, model_dtype: torch.dtype) -> torch.dtype:
    """The dtype the cache stores: the model's, or float8 e4m3 (scale 1.0) when asked for."""
    return torch.float8_e4m3fn if config.kv_cache_dtype == "fp8_e4m3" else model_dtype


def num_blocks_for_budget(layout: KVLayout, budget_bytes: int) -> int:
    return max(0, budget_bytes // layout.bytes_per_block)


def kv_budget_bytes(config: CacheConfig, device: torch.device, peak_step_bytes: int) -> int:
    """Memory left for the KV pool after the weights and one maximum-size step.

    On a GPU this is `total * gpu_memory_utilization - peak bytes allocated while profiling`
    (the weights are part of that peak). On the CPU there is nothing trustworthy to profile
    against, so the configured byte budget decides.
    """
    if device.type == "cuda":
        _, total = torch.cuda.mem_get_info(device)
        return int(total * config.gpu_memory_utilization) - peak_step_bytes
    return config.cpu_kv_cache_bytes
