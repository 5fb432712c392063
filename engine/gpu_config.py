"""How the engine uses a CUDA device (ignored on the CPU)."""
from __future__ import annotations

from dataclasses import dataclass

SMALL_GRAPH_BATCHES = (1, 2, 4, 8)


@dataclass(slots=True)
class GpuConfig:
    """`cuda_graphs` replays decode-only steps from CUDA graphs captured at startup at padded batch sizes
    1, 2, 4, 8, then every `graph_batch_step` streams up to the scheduler's `max_num_seqs` (it needs an
    attention backend that supports graphs: "triton"); with `sample_in_graph` they include the LM
    head and sampling, for families that provide a graph emitter (Orpheus, Qwen3-TTS). `overlap_codec` decodes each
    step's codec windows on their own CUDA stream beside the next step's forward (audio one step later;
    not for a codec that decodes from per-stream state slots, Qwen3-TTS's, which decodes in the step);
    with `codec_graphs` the windows of the steady-state lengths replay graphs captured at the same padded
    batch sizes up to 64 (engine/audio/graphs.py), the others decode eagerly (for a codec with state
    slots, its incremental steps of the usual feed lengths: engine/audio/state_graphs.py).
    `fused_ops` swaps the Llama layers for Triton-fused RMSNorm + residual and SiLU-and-multiply (off until
    the H200 run shows a gain: benchmarks/GPU_RUN.md). Every field is valid once constructed."""

    cuda_graphs: bool = True
    sample_in_graph: bool = True
    overlap_codec: bool = True
    codec_graphs: bool = True
    fused_ops: bool = False
    graph_batch_step: int = 16

    def __post_init__(self) -> None:
        if self.graph_batch_step not in (8, 16):
            raise ValueError(f"graph_batch_step must be 8 or 16, got {self.graph_batch_step}")

    def graph_batch_sizes(self, max_num_seqs: int) -> list[int]:
        """Ascending padded sizes; the last is `max_num_seqs`, so every decode batch has a graph."""
        if max_num_seqs < 1:
            raise ValueError(f"max_num_seqs must be >= 1, got {max_num_seqs}")
        steps = range(self.graph_batch_step, max_num_seqs, self.graph_batch_step)
        return sorted({*(s for s in SMALL_GRAPH_BATCHES if s < max_num_seqs), *steps, max_num_seqs})
