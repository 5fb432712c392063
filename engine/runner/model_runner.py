"""Turns a scheduled step into one forward over a flat batch, and its outputs; `build_model_runner` sets
up what that needs (KV cache, fused ops, decode graphs) from an engine config."""
from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import torch

from engine.config import EngineConfig
from engine.runner.decode_graphs import DecodeGraphs, capture_decode_graphs
from engine.runner.kv_setup import build_kv_cache
from memory.kv_cache_manager import KVCacheManager
from model.attention.metadata import AttentionMetadata
from model.families.base import SpeechFamily, StreamState
from model.sampling.native import build_sampling_kernels
from scheduler.output import ScheduledChunk


@dataclass(slots=True)
class StepResult:
    """Outputs by request id for the chunks that reached their sequence's end; failures by
    request id for requests whose inputs or outputs raised (the rest of the batch is unaffected)."""

    outputs: dict[str, Any] = field(default_factory=dict)
    failures: dict[str, Exception] = field(default_factory=dict)
    forward_seconds: float = 0.0
    # The family's `emit`: sampling, and a depth stage where the family has one.
    emit_seconds: float = 0.0


class ModelRunner:
    """Owns the KV cache (its tensors and `kv_manager`, whose block tables the scheduler fills):
    builds positions, slot mappings and block tables for a step and runs the family's embed →
    backbone → head → emit. Stateless between steps except for the caches. With `decode_graphs`
    (CUDA only), decode-only steps replay a captured graph of the backbone (and of head and emit,
    when the family has a graph emitter) instead of running them eagerly; every other step runs
    eagerly. `build_model_runner` makes one from an engine config."""

    def __init__(
        self,
        family: SpeechFamily,
        kv_manager: KVCacheManager,
        kv_caches: list[torch.Tensor],
        device: torch.device,
        decode_graphs: DecodeGraphs | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.family = family
        self.clock = clock  # times the forward: the engine's clock, so fake time stays consistent
        self.kv_manager = kv_manager
        self.kv_caches = kv_caches
        self.block_size = kv_manager.block_size
        self.device = device
        self.decode_graphs = decode_graphs

    def execute(self, chunks: Sequence[ScheduledChunk], streams: dict[str, StreamState]) -> StepResult:
        if not chunks:
            return StepResult()
        try:
            return self._run(chunks, streams)
        except Exception as exc:  # noqa: BLE001 - isolated below, re-raised per request
            if len(chunks) == 1:
                return StepResult(failures={chunks[0].seq.request_id: exc})
        # NOTE: re-running a chunk alone is safe: it writes the same K/V to the same slots.
        # This finds the request at fault without failing the others in its batch.
        result = StepResult()
        for chunk in chunks:
            single = self.execute([chunk], streams)
            result.outputs.update(single.outputs)
            result.failures.update(single.failures)
            result.forward_seconds += single.forward_seconds
            result.emit_seconds += single.emit_seconds
        return result

    @torch.inference_mode()
    def _run(self, chunks: Sequence[ScheduledChunk], streams: dict[str, StreamState]) -> StepResult:
        spans = [(streams[c.seq.request_id], c.start, c.end) for c in chunks]
        meta = AttentionMetadata.build(
            query_lens=[c.num_new_tokens for c in chunks],
            context_lens=[c.start for c in chunks],
            block_tables=[self.kv_manager.block_ids(c.seq.request_id) for c in chunks],
            block_size=self.block_size,
            device=self.device,
        )
        positions = token_positions(chunks).to(self.device)
        embeds = self.family.embed(spans)
        ends = itertools.accumulate(c.num_new_tokens for c in chunks)
        last_rows = [end - 1 for end, c in zip(ends, chunks) if c.produces_output]
        emitting = [c for c in chunks if c.produces_output]
        started = self.clock()
        graphs = self.decode_graphs
        if graphs is not None and graphs.can_run(meta):
            step_streams = [streams[c.seq.request_id] for c in chunks]
            replayed = graphs.run(embeds, positions, meta, step_streams, [c.produces_output for c in chunks])
            if graphs.emitter is not None:
                # Head and sampling ran inside the graph: one output per chunk (the host copy
                # waits for the replay, so the forward time includes the sampling).
                outputs = graphs.emitter.outputs(replayed)
                return StepResult(
                    outputs={c.seq.request_id: out for c, out in zip(chunks, outputs) if c.produces_output},
                    forward_seconds=self.clock() - started,
                )
            hidden = replayed
        else:
            hidden = self.family.backbone.forward(embeds, positions, self.kv_caches, meta)
        head_out = None
        if emitting:
            head_out = self.family.head(hidden.index_select(0, torch.tensor(last_rows, device=hidden.device)))
        if hidden.is_cuda:
            # NOTE: this stream only: a device-wide sync would also wait for the codec's side
            # stream and undo the overlap of step N's codec with step N+1's forward.
            torch.cuda.current_stream(hidden.device).synchronize()
        forward_seconds = self.clock() - started
        if head_out is None:
            return StepResult(forward_seconds=forward_seconds)
        emit_started = self.clock()
        outputs = self.family.emit(head_out, [streams[c.seq.request_id] for c in emitting])
        return StepResult(
            outputs={c.seq.request_id: out for c, out in zip(emitting, outputs)},
            forward_seconds=forward_seconds,
            emit_seconds=self.clock() - emit_started,
        )


def token_positions(chunks: Sequence[ScheduledChunk]) -> torch.Tensor:
    """Every new token's position, chunk after chunk (int64, on the host)."""
    if all(c.end - c.start == 1 for c in chunks):
        # A decode step: one list, one tensor (a range and a concatenation per row cost more).
        return torch.tensor([c.start for c in chunks], dtype=torch.long)
    return torch.cat([torch.arange(c.start, c.end) for c in chunks])


def build_model_runner(family: SpeechFamily, config: EngineConfig, device: torch.device,
                       clock: Callable[[], float] = time.perf_counter) -> ModelRunner:
    """Sizes and allocates the KV cache (profiling a step first on CUDA), then on CUDA fuses the
    backbone's ops when `config.gpu.fused_ops` asks and captures its decode graphs when enabled;
    on the CPU builds the sampling kernels, so that no request waits for a compiler."""
    kv_manager, kv_caches = build_kv_cache(family, config, device)
    if config.gpu.fused_ops and device.type == "cuda":
        family.backbone.fuse_ops()
    decode_graphs = capture_decode_graphs(family, kv_caches, config, device)
    if device.type == "cpu":
        build_sampling_kernels()
    return ModelRunner(family, kv_manager, kv_caches, device, decode_graphs, clock)
