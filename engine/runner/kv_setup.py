"""Sizes the KV pool from the memory that is really left, then allocates it."""
from __future__ import annotations

import logging

import torch

from engine.config import EngineConfig
from memory.kv_cache_manager import KVCacheManager
from memory.kv_tensors import KVLayout, kv_budget_bytes, kv_cache_dtype, num_blocks_for_budget
from model.attention.metadata import AttentionMetadata
from model.families.base import SpeechFamily
from scheduler.config import SchedulerConfig

logger = logging.getLogger("chorus.engine")


def build_kv_cache(
    family: SpeechFamily, config: EngineConfig, device: torch.device
) -> tuple[KVCacheManager, list[torch.Tensor]]:
    # NOTE: before sizing, so that what the depth stage's scratch takes is not promised to the KV pool.
    family.reserve(config.scheduler.max_num_seqs)
    backbone = family.backbone
    spec = backbone.kv_spec
    dtype = kv_cache_dtype(config.cache, backbone.dtype)
    block_size = config.cache.block_size
    layout = KVLayout(spec.num_layers, spec.num_kv_heads, spec.head_dim, block_size, dtype)
    num_blocks = config.cache.num_blocks
    if num_blocks is None:
        peak = profile_peak_step_bytes(family, config, layout, device) if device.type == "cuda" else 0
        num_blocks = num_blocks_for_budget(layout, kv_budget_bytes(config.cache, device, peak))
    min_blocks = -(-config.scheduler.max_num_batched_tokens // block_size)
    if num_blocks < min_blocks:
        raise ValueError(
            f"the KV cache fits only {num_blocks} blocks of {block_size} tokens, fewer than one "
            f"step's {config.scheduler.max_num_batched_tokens} tokens need: give it more memory"
        )
    logger.info(
        "KV cache: %d blocks x %d tokens (%.1f MiB, %d tokens)",
        num_blocks, block_size, num_blocks * layout.bytes_per_block / 2**20, num_blocks * block_size,
    )
    kv_caches = layout.allocate(num_blocks, device)
    manager = KVCacheManager(num_blocks, block_size, config.cache.enable_prefix_caching)
    return manager, kv_caches


def profile_peak_step_bytes(
    family: SpeechFamily, config: EngineConfig, layout: KVLayout, device: torch.device
) -> int:
    """Peak device memory (weights included) while running `run_largest_step`, plus what stays
    reserved but unallocated after it (CUDA graphs captured before, e.g. the codec's, keep their
    scratch in private pools that no other allocation can use). The scratch KV cache it needs is
    not counted: the real pool replaces it."""
    num_blocks = -(-config.scheduler.max_num_batched_tokens // layout.block_size)
    scratch = layout.allocate(num_blocks, device)
    scratch_bytes = num_blocks * layout.bytes_per_block
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    run_largest_step(family, config.scheduler, scratch, layout.block_size)
    torch.cuda.synchronize(device)
    peak = torch.cuda.max_memory_allocated(device) - scratch_bytes
    del scratch
    torch.cuda.empty_cache()
    return peak + torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)


@torch.inference_mode()
def run_largest_step(
    family: SpeechFamily, config: SchedulerConfig, kv_caches: list[torch.Tensor], block_size: int
) -> torch.Tensor:
    """One maximum-size step through the family's own output layer: a prefill of
    `max_num_batched_tokens` tokens (zero embeddings: the memory a step takes does not depend on its
    values) whose `head` runs at `max_num_seqs` rows; returns the head's output."""
    backbone = family.backbone
    num_tokens = config.max_num_batched_tokens
    device = kv_caches[0].device
    meta = AttentionMetadata.build(
        query_lens=[num_tokens],
        context_lens=[0],
        block_tables=[list(range(-(-num_tokens // block_size)))],
        block_size=block_size,
        device=device,
    )
    embeds = torch.zeros(num_tokens, backbone.hidden_size, dtype=backbone.dtype, device=device)
    hidden = backbone.forward(embeds, torch.arange(num_tokens, device=device), kv_caches, meta)
    return family.head(hidden[: config.max_num_seqs])
