"""How the KV cache is laid out and how much memory it may take."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(slots=True)
class CacheConfig:
    """KV cache sizing knobs. Exactly one source decides the pool size: `num_blocks` when set
    (tests, reproducible benchmarks), otherwise the device's memory after a profiling step."""

    block_size: int = 16
    # GPU: fraction of total device memory Chorus may use (weights + activations + KV).
    gpu_memory_utilization: float = 0.9
    # CPU: bytes the KV pool may take (there is no reliable "free memory" to profile against).
    cpu_kv_cache_bytes: int = 512 * 1024**2
    num_blocks: int | None = None
    enable_prefix_caching: bool = True
    # "auto": the model's dtype. "fp8_e4m3": half the bytes of bf16 (twice the blocks), stored with a
    # scale of 1.0 (values saturate at +-448) and upcast to the model's dtype when read.
    kv_cache_dtype: Literal["auto", "fp8_e4m3"] = "auto"
    # Streams whose codec state (a streaming codec's convolution histories and attention windows,
    # memory/state_slots.py) can be held at once; None: twice the scheduler's max_num_seqs, so
    # every generating stream has one and as many again can finish playing out.
    codec_state_slots: int | None = None
    # Codec states of voices' codec prefixes (an in-context clone's clip: engine/audio/primers.py),
    # kept on the host within this many bytes, least recently used dropped (and decoded again when
    # next needed): ~5.2 MB a voice of Qwen3-TTS's 12 Hz codec at its released size.
    codec_primer_bytes: int = 256 * 1024**2

    def __post_init__(self) -> None:
        if self.block_size < 1 or self.block_size & (self.block_size - 1):
            raise ValueError(f"block_size must be a power of two, got {self.block_size}")
        if not 0.0 < self.gpu_memory_utilization <= 1.0:
            raise ValueError(
                f"gpu_memory_utilization must be in (0, 1], got {self.gpu_memory_utilization}"
            )
        if self.cpu_kv_cache_bytes <= 0:
            raise ValueError(f"cpu_kv_cache_bytes must be > 0, got {self.cpu_kv_cache_bytes}")
        if self.num_blocks is not None and self.num_blocks < 1:
            raise ValueError(f"num_blocks must be >= 1 or None, got {self.num_blocks}")
        if self.codec_state_slots is not None and self.codec_state_slots < 1:
            raise ValueError(f"codec_state_slots must be >= 1 or None, got {self.codec_state_slots}")
        if self.codec_primer_bytes < 0:
            raise ValueError(f"codec_primer_bytes must be >= 0, got {self.codec_primer_bytes}")
        if self.kv_cache_dtype not in ("auto", "fp8_e4m3"):
            raise ValueError(f"kv_cache_dtype must be 'auto' or 'fp8_e4m3', got {self.kv_cache_dtype!r}")
