"""Correctness on the device before any timing: Triton attention, one model step and a graph replay, each
against the PyTorch reference path on the same inputs."""
from __future__ import annotations

import gc
import random
from typing import Callable

import torch

from model.attention import AttentionMetadata, get_attention_backend

# Largest elementwise difference allowed on unit-scale bf16 values (one bf16 rounding of the softmax weights).
ATTENTION_TOLERANCE = 3e-2
# Relative difference of final hidden states: bf16 rounding differs between the two paths in every layer.
STEP_TOLERANCE = 5e-2


def mixed_batch(shapes: list[tuple[int, int]], block_size: int, device: torch.device) -> AttentionMetadata:
    """Metadata for (context_len, query_len) sequences over shuffled, scattered blocks."""
    needed = [-(-(ctx + q) // block_size) for ctx, q in shapes]
    free = list(range(sum(needed) + 8))
    random.Random(0).shuffle(free)
    tables = [[free.pop() for _ in range(n)] for n in needed]
    return AttentionMetadata.build([q for _, q in shapes], [c for c, _ in shapes], tables, block_size, device=device)


def check_attention(num_heads: int, num_kv_heads: int, head_dim: int, device: torch.device) -> float:
    """Max |triton - reference| over a mixed prefill/decode batch in bf16 (reference in float32)."""
    gen = torch.Generator(device=device).manual_seed(0)
    meta = mixed_batch([(0, 37), (300, 1), (17, 1), (64, 20), (0, 1), (129, 1)], 16, device)
    num_blocks = int(meta.block_tables.max()) + 1
    cache = torch.randn(2, num_blocks, 16, num_kv_heads, head_dim, generator=gen, device=device)
    query = torch.randn(meta.num_tokens, num_heads, head_dim, generator=gen, device=device)
    key, value = torch.randn(2, meta.num_tokens, num_kv_heads, head_dim, generator=gen, device=device)
    bf16 = [t.bfloat16() for t in (query, key, value, cache)]
    out = get_attention_backend("triton").forward(*bf16, meta, head_dim ** -0.5)
    expected = get_attention_backend("torch").forward(*(t.float() for t in bf16), meta, head_dim ** -0.5)
    return _checked((out.float() - expected).abs().max().item(), ATTENTION_TOLERANCE, "triton attention")


@torch.inference_mode()
def check_step(backbone: torch.nn.Module, block_size: int, device: torch.device) -> dict[str, float]:
    """Relative error of one mixed step's hidden states, triton vs reference attention; and, on CUDA, of a
    decode step replayed from a CUDA graph vs the same step run eagerly."""
    from engine.runner.decode_graphs import DecodeGraphs

    config = backbone.config
    meta = mixed_batch([(0, 24), (0, 5), (0, 1), (0, 9)], block_size, device)
    num_blocks = int(meta.block_tables.max()) + 1
    dtype = next(backbone.parameters()).dtype
    shape = (2, num_blocks, block_size, config.num_key_value_heads, config.head_dim)
    ids = torch.randint(0, config.vocab_size, (meta.num_tokens,), device=device)
    positions = torch.cat([torch.arange(q) for q in meta.query_lens]).to(device)
    results = {}
    hidden = {}
    for name in ("triton", "torch"):
        backbone.attention_backend = get_attention_backend(name)
        caches = [torch.zeros(shape, dtype=dtype, device=device) for _ in backbone.layers]
        hidden[name] = backbone.forward(backbone.embed_tokens(ids), positions, caches, meta).float()
    results["step_rel_error"] = _checked(_relative(hidden["triton"], hidden["torch"]), STEP_TOLERANCE, "model step")
    backbone.attention_backend = get_attention_backend("triton")
    if device.type == "cuda":
        decode = AttentionMetadata.build([1] * 3, [5, 24, 1], [t[: 2] for t in meta.block_tables.tolist()[:3]],
                                         block_size, device=device)
        decode_ids = torch.randint(0, config.vocab_size, (3,), device=device)
        decode_positions = torch.tensor([5, 24, 1], device=device)
        eager_caches = [c.clone() for c in caches]
        eager = backbone.forward(backbone.embed_tokens(decode_ids), decode_positions, eager_caches, decode)
        graphs = DecodeGraphs(backbone, caches, block_size, [4], max_model_len=64)
        graphs.capture()
        replayed = graphs.run(backbone.embed_tokens(decode_ids), decode_positions, decode)
        results["graph_rel_error"] = _checked(_relative(replayed.float(), eager.float()), 1e-2, "graph replay")
    return results


@torch.inference_mode()
def check_graph_sampling(family, device: torch.device, steps: int = 16) -> dict[str, float]:
    """Tokens from the family's graph emitter (LM head + constrained sampling; captured in a CUDA
    graph and replayed on CUDA, run directly over the same buffers elsewhere) against its eager
    `head` + `emit` on the same hidden states, for 8 seeded streams over 16 steps (so seen codes come back as candidates at their frame position): they must be
    identical (same logits kernels at the same shapes, same per-request generators)."""
    from model.families.base import SpeechPrompt
    from model.sampling import SamplingParams

    rows = 8
    def streams():
        return [family.new_stream(SpeechPrompt(token_ids=[1, 2, 3 + i]), SamplingParams(
            temperature=(0.0, 0.6, 1.0, 1.2)[i % 4], top_p=(1.0, 0.9)[i % 2], top_k=(0, 40)[i // 4],
            repetition_penalty=(1.0, 1.3, 3.0, 0.3)[i % 4], seed=100 + i, min_tokens=i % 3)) for i in range(rows)]

    graph_streams, eager_streams = streams(), streams()
    emitter = family.graph_emitter(rows)
    hidden = torch.zeros(rows, family.backbone.config.hidden_size, device=device,
                         dtype=next(family.backbone.parameters()).dtype)
    emit = _replayed(lambda: emitter.emit(hidden), device)
    gen = torch.Generator(device=device).manual_seed(0)
    mismatches = 0
    for _ in range(steps):
        hidden.copy_(torch.randn(hidden.shape, generator=gen, device=device))
        emitter.prepare(graph_streams, [True] * rows, rows)
        got = emitter.outputs(emit())
        expected = family.emit(family.head(hidden.clone()), eager_streams)
        mismatches += sum(a != b for a, b in zip(got, expected))
        for stream, token in zip(graph_streams, got):
            family.accept(stream, token)
        for stream, token in zip(eager_streams, expected):
            family.accept(stream, token)
    for stream in graph_streams:
        family.release(stream)
    return {"graph_sampling_mismatches": _checked(mismatches, 0, "sampling inside the graph")}


def tiny_qwen3(device: torch.device, attention: str):
    """`tiny-random-qwen3` (built in, nothing downloaded) on `device`: its family and front end."""
    from model.config import ModelConfig
    from model.loader import load_family, load_frontend

    config = ModelConfig(model="tiny-random-qwen3", device=device.type, dtype="float32", attention_backend=attention)
    return load_family(config), load_frontend(config)


def check_qwen3_graph_emit(family, frontend, device: torch.device, steps: int = 8) -> dict[str, float]:
    """Frames from Qwen3-TTS's graph emitter (the talker's head, code 0 and the code predictor's
    fifteen sub-steps; captured in a CUDA graph and replayed on CUDA, run directly over the same
    buffers elsewhere) against its eager `head` + `emit` on the same hidden states, for 8 streams
    of `tiny_qwen3`'s family, seeded, two of them greedy: identical. Compared while every row is
    live: the eager emit of fewer rows runs other matmul shapes than the graph's padded 8, which
    may pick other kernels and flip a near-tie (not a capture bug)."""
    rows = 8
    family.reserve(rows)
    defaults = frontend.default_sampling()

    def streams():
        return [family.new_stream(frontend.prepare(f"Check number {i}.", frontend.voices[0]),
                                  defaults.replace(seed=200 + i, temperature=0.0 if i % 4 == 3 else defaults.temperature))
                for i in range(rows)]

    graph_streams, eager_streams = streams(), streams()
    with torch.inference_mode():
        emitter = family.graph_emitter(rows)
        hidden = torch.zeros(rows, family.backbone.hidden_size, device=device)
        emit = _replayed(lambda: emitter.emit(hidden), device)
        gen = torch.Generator(device=device).manual_seed(0)
        mismatches, compared = 0, 0
        for _ in range(steps):
            hidden.copy_(torch.randn(hidden.shape, generator=gen, device=device))
            emitter.prepare(graph_streams, [True] * rows, rows)
            got = emitter.outputs(emit())
            expected = family.emit(family.head(hidden.clone()), eager_streams)
            mismatches, compared = mismatches + sum(a != b for a, b in zip(got, expected)), compared + 1
            ended = [family.accept(stream, frame).finished for stream, frame in zip(eager_streams, expected)]
            for stream, frame in zip(graph_streams, got):
                family.accept(stream, frame)
            if any(ended):
                break
        for stream in graph_streams:
            family.release(stream)
    return {"qwen3_graph_emit_mismatches": _checked(mismatches, 0, "Qwen3-TTS's depth stage inside the graph"),
            "qwen3_graph_emit_steps": compared}


@torch.inference_mode()
def check_qwen3_codec_step_graphs(codec, device: torch.device) -> dict[str, float]:
    """The 12 Hz codec's incremental steps (`tiny_qwen3`'s codec) from step graphs captured on CUDA
    (engine/audio/state_graphs.py; run directly over the same buffers elsewhere) against the
    decoder's own step, audio and states: three streams of different histories, padded to 4, fed
    1, 4, 2 and 1 frames; errors relative to the largest value. Against the same 4 padded rows
    stepped eagerly (the same kernels: zero unless a capture or buffer is wrong; 1e-4 leaves
    room for a kernel that sums in another order), and against the 3 rows alone (another batch
    may take other convolution algorithms, TF32 on a GPU: 1 %, which wrong slots or stale inputs
    exceed by far)."""
    from engine.audio.state_graphs import GraphedSlottedDecoder

    plain = codec.incremental
    graphed = GraphedSlottedDecoder(plain, codec.frame_shape, codec.frame_dtype, [1, 2, 4], [1, 2, 4], device,
                                    eager_replay=device.type != "cuda")
    graphed.capture()
    gen = torch.Generator(device="cpu").manual_seed(0)
    states, before = plain.initial_states(3), torch.tensor([0, 7, 13], device=device)
    padded_error = relative_error = 0.0

    def pad(t: torch.Tensor) -> torch.Tensor:  # as the graphs pad: row 0 again
        return torch.cat([t, t[:1]])

    for n in (1, 4, 2, 1):
        frames = torch.randint(0, codec.config.codebook_size, (3, n, *codec.frame_shape), generator=gen).to(device)
        want_audio, want_states = plain.step(frames, before, states)
        padded_audio, padded_states = plain.step(pad(frames), pad(before), [pad(s) for s in states])
        audio, new_states = graphed.step(frames, before, states)
        pairs = [(audio, padded_audio[:3], want_audio),
                 *((got, padded[:3], want) for got, padded, want in zip(new_states, padded_states, want_states))]
        for got, padded, want in pairs:
            padded_error = max(padded_error, _max_relative(got, padded))
            relative_error = max(relative_error, _max_relative(got, want))
        states, before = [state.clone() for state in want_states], before + n
    return {"qwen3_codec_step_graph_padded_relative_error": _checked(padded_error, 1e-4, "the 12 Hz codec's step graphs"),
            "qwen3_codec_step_graph_unpadded_relative_error": _checked(
                relative_error, 1e-2, "the 12 Hz codec's step graphs against unpadded steps")}


def check_qwen3_engine(device: torch.device, attention: str, streams: int = 8, frames: int = 24) -> dict[str, float]:
    """`tiny-random-qwen3` served by the engine core with every GPU path on (the decode graphs with
    the depth stage inside, the codec's step graphs, its side stream) against the same core with
    none of them: `streams` greedy streams of `frames` frames, admitted together, each one's
    audio against its twin's, relative to the largest sample. A near-tie of logits may flip one
    code under other kernels (other batch shapes) and spoil one stream's audio from there on;
    a capture or buffer bug spoils them all: at most one may differ by more than 1 %. Off CUDA
    both cores run the same eager path."""
    from capacity.config import CapacityConfig
    from engine.config import EngineConfig
    from engine.core import EngineCore
    from engine.gpu_config import GpuConfig
    from memory.config import CacheConfig
    from model.config import ModelConfig
    from model.loader import load_frontend
    from scheduler.config import SchedulerConfig

    model = ModelConfig(model="tiny-random-qwen3", device=device.type, dtype="float32", attention_backend=attention)
    frontend = load_frontend(model)
    params = frontend.default_sampling().replace(temperature=0.0, max_tokens=frames, min_tokens=frames)
    voice = frontend.voices[0]

    def served(gpu: GpuConfig) -> dict[str, torch.Tensor]:
        # A fixed KV pool: sized from free memory, each core would take 90 % of the GPU.
        config = EngineConfig(model=model, cache=CacheConfig(num_blocks=512),
                              scheduler=SchedulerConfig(max_num_seqs=streams),
                              capacity=CapacityConfig(max_queue_delay=None), gpu=gpu, mode="inproc")
        core = EngineCore(config)
        for i in range(streams):
            core.add_request(f"s{i}", frontend.prepare(f"Engine check number {i}, spoken aloud.", voice), params)
        pcm: dict[str, list] = {}
        while core.has_work:
            for chunk in core.step():
                pcm.setdefault(chunk.request_id, []).append(torch.from_numpy(chunk.pcm))
        del core
        gc.collect()  # the core's graphs and pools go before the next core starts
        if device.type == "cuda":
            torch.cuda.empty_cache()
        return {rid: torch.cat(parts) for rid, parts in pcm.items()}

    fast = served(GpuConfig())
    plain = served(GpuConfig(cuda_graphs=False, sample_in_graph=False, overlap_codec=False, codec_graphs=False))
    errors = sorted(_max_relative(fast[rid], plain[rid]) if rid in fast and fast[rid].shape == plain[rid].shape
                    else float("inf") for rid in plain)
    return {"qwen3_engine_graphs_relative_error_second_worst": _checked(
                errors[-2], 1e-2, "Qwen3-TTS through the engine's GPU paths against its eager paths"),
            "qwen3_engine_graphs_streams_within_1pct": sum(e <= 1e-2 for e in errors)}


@torch.inference_mode()
def check_codec_graphs(codec, device: torch.device) -> dict[str, float]:
    """Max |graph - eager| of a padded batch of 3 nine-frame windows (Orpheus's steady window)
    decoded by a captured codec graph (run directly over its buffers off CUDA)."""
    from engine.audio.graphs import WindowGraphs

    graphs = WindowGraphs(codec, [1, 4], [9], device, eager_replay=device.type != "cuda")
    graphs.capture()
    gen = torch.Generator(device="cpu").manual_seed(0)
    frames = torch.randint(0, codec.codebook_size, (3, 9, *codec.frame_shape), generator=gen).to(device)
    error = (graphs.run(frames).float() - codec.decode(frames).float()).abs().max().item()
    return {"codec_graph_max_abs_error": _checked(error, 1e-4, "codec graph replay")}


def _replayed(run: Callable[[], torch.Tensor], device: torch.device) -> Callable[[], torch.Tensor]:
    """`run` captured in a CUDA graph and replayed, on CUDA (an emitter's: before any prepare
    every row is padding, so the warm-up run touches no stream); run directly elsewhere."""
    if device.type != "cuda":
        return run
    from engine.graph_capture import capture_graph

    graph, captured = capture_graph(run, None)

    def replay() -> torch.Tensor:
        graph.replay()
        return captured

    return replay


def _relative(actual: torch.Tensor, expected: torch.Tensor) -> float:
    return ((actual - expected).norm() / expected.norm()).item()


def _max_relative(got: torch.Tensor, want: torch.Tensor) -> float:
    """max |got - want| relative to the largest |want| (`_relative` is the norms' ratio)."""
    return ((got - want).abs().max() / want.abs().max().clamp_min(1e-6)).item()


def _checked(value: float, bound: float, what: str) -> float:
    if not value <= bound:
        raise AssertionError(f"{what}: error {value:.3g} exceeds {bound:.3g}; refusing to time a wrong path")
    return value
