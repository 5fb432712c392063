"""Qwen3-TTS through the decode-graph path (engine/runner/decode_graphs.py) on the CPU, its head,
code 0 and depth stage inside the graph function (Qwen3GraphEmitter).

The graphs are "replayed" eagerly (DecodeGraphs(eager_replay=True)) with the Triton backend under
its interpreter, so everything but the capture runs: padding rows, the buffers' refills, prompt
steps running eagerly between graph steps (their codes 0 marked in the graph sampler's penalty
bitmap), a request waiting for a row. Seeded requests must get the very frames the eager engine
gives them.
"""
from __future__ import annotations

import dataclasses
import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")  # before anything imports triton
pytest.importorskip("triton")

from capacity.config import CapacityConfig  # noqa: E402
from engine.core import EngineCore  # noqa: E402
from engine.runner.decode_graphs import DecodeGraphs  # noqa: E402
from engine.runner.model_runner import ModelRunner  # noqa: E402
from model.config import ModelConfig  # noqa: E402
from model.loader import load_frontend  # noqa: E402

from ..conftest import drain, engine_config  # noqa: E402
from ..fake_clock import StepClock  # noqa: E402

MODEL = "tiny-random-qwen3"
TEXTS = ("Graph one.", "Graph two speaks.", "Three waits.")


def run(graphs: bool) -> tuple[dict[str, list[list[int]]], int]:
    """Each request's frames, and how many steps sampled inside the graph function."""
    config = engine_config(MODEL, num_blocks=64, max_num_seqs=2, max_num_batched_tokens=32, capacity=CapacityConfig())
    config.model = dataclasses.replace(config.model, attention_backend="triton")
    clock = StepClock()
    core = EngineCore(config, clock=clock)
    if graphs:
        family, runner = core.family, core.runner
        decode_graphs = DecodeGraphs(family.backbone, runner.kv_caches, config.cache.block_size, [1, 2],
                                     family.max_model_len, emitter=family.graph_emitter(2), eager_replay=True)
        core.runner = ModelRunner(family, runner.kv_manager, runner.kv_caches, runner.device, decode_graphs, clock)
        emit = decode_graphs.emitter.emit

        def counted(hidden):
            replays.append(hidden.shape[0])
            return emit(hidden)

        decode_graphs.emitter.emit = counted
    replays: list[int] = []
    clock.attach(core)
    frontend = load_frontend(ModelConfig(model=MODEL))
    defaults = frontend.default_sampling()
    streams = {}
    for i, text in enumerate(TEXTS):  # three requests, two rows: the third starts when one ends
        params = defaults.replace(seed=20 + i, max_tokens=3 + i, min_tokens=min(defaults.min_tokens, 3 + i))
        core.add_request(f"r{i}", frontend.prepare(text, frontend.voices[0]), params)
        waiting = [r for r in core.admission.queue if r.request_id == f"r{i}"]
        streams[f"r{i}"] = waiting[0].stream if waiting else core.requests.get(f"r{i}").stream
    assert [r.request_id for r in core.admission.queue] == ["r2"]
    chunks = drain(core)
    assert sorted(chunks) == sorted(streams)
    return {rid: s.frames[: s.num_frames].tolist() for rid, s in streams.items()}, len(replays)


def test_graph_steps_give_the_eager_frames():
    eager, _ = run(graphs=False)
    assert all(len(frames) > 0 for frames in eager.values())
    frames, replays = run(graphs=True)
    assert replays >= 5  # most decode steps ran in the graph function
    assert frames == eager
