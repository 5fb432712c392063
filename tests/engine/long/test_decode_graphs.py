"""The decode-graph path (engine/runner/decode_graphs.py) through its persistent buffers, on the CPU.

The graphs are "replayed" eagerly (DecodeGraphs(eager_replay=True)) with the Triton backend under
its interpreter, so everything but the capture itself runs: padding rows, the buffers' refills,
and the Orpheus head + sampling inside the graph function. Seeded requests must get the very
tokens the plain eager engine gives them, through joins, ends and preemption.
"""
from __future__ import annotations

import dataclasses

import pytest

pytest.importorskip("triton")

from capacity.config import CapacityConfig  # noqa: E402
from engine.core import EngineCore  # noqa: E402
from engine.runner.decode_graphs import DecodeGraphs  # noqa: E402
from engine.runner.model_runner import ModelRunner  # noqa: E402
from model.sampling import SamplingParams  # noqa: E402

from ..conftest import engine_config, started  # noqa: E402
from ..fake_clock import StepClock  # noqa: E402


NUM_BLOCKS_THAT_PREEMPT = 4


def run(tiny_model, tiny_frontend, graphs: str | None, num_blocks: int = 128):
    # Production's admission and chunking, on a StepClock: both runs decide alike.
    config = engine_config(tiny_model, num_blocks=num_blocks, max_num_seqs=3, max_num_batched_tokens=32,
                           capacity=CapacityConfig())
    config.model = dataclasses.replace(config.model, attention_backend="triton")
    clock = StepClock()
    core = EngineCore(config, clock=clock)
    if graphs is not None:
        family, runner = core.family, core.runner
        decode_graphs = DecodeGraphs(
            family.backbone, runner.kv_caches, config.cache.block_size, [1, 2, 4], family.max_model_len,
            emitter=family.graph_emitter(4) if graphs == "with sampling" else None, eager_replay=True,
        )
        core.runner = ModelRunner(family, runner.kv_manager, runner.kv_caches, runner.device, decode_graphs, clock)
    clock.attach(core)  # the runner it times is the one that runs
    streams = {}
    for i in range(4):  # 4 requests, at most 3 running: streams join and leave mid-run
        rid = f"r{i}"
        params = SamplingParams(temperature=0.8, top_p=0.9, top_k=(0, 50)[i % 2], repetition_penalty=(1.1, 0.3)[i % 2],
                                seed=10 + i, max_tokens=7 * (2 + i % 2))
        core.add_request(rid, tiny_frontend.prepare(f"graph {i}", "tara"), params)
        # The fourth waits in admission's queue for a slot (admission counts max_num_seqs too).
        waiting = [r for r in core.admission.queue if r.request_id == rid]
        streams[rid] = waiting[0].stream if waiting else started(core, rid).stream
    assert [r.request_id for r in core.admission.queue] == ["r3"]
    chunks: dict[str, list] = {}
    while core.has_work:
        for chunk in core.step():
            chunks.setdefault(chunk.request_id, []).append(chunk)
        assert not core.take_refusals()  # it starts in time
        if graphs == "with sampling":
            assert_bitmap_holds_each_history(core)
    assert sorted(chunks) == sorted(streams)
    preemptions = sum(c[-1].metrics.num_preemptions for c in chunks.values())
    assert core.kv_manager.num_free_blocks == core.kv_manager.num_blocks
    return {rid: s.token_ids for rid, s in streams.items()}, preemptions


def assert_bitmap_holds_each_history(core: EngineCore) -> None:
    """The graph sampler's seen bitmap holds each slotted stream's penalized history after every
    step, graph-sampled or eager (mixed prefill + decode steps run eagerly)."""
    seen = core.runner.decode_graphs.emitter.sampler.seen
    for request in core.requests.values():
        state = request.stream.sampling
        slot = seen.slot(state)
        if slot is not None and state.needs_penalty:
            assert seen.bits[slot].nonzero()[:, 0].tolist() == sorted(state.penalized_token_ids.tolist())


@pytest.fixture(scope="module")
def eager_tokens(tiny_model, tiny_frontend):
    return run(tiny_model, tiny_frontend, graphs=None)[0]


@pytest.mark.parametrize("graphs", ["backbone only", "with sampling"])
def test_graph_steps_give_the_eager_tokens(tiny_model, tiny_frontend, eager_tokens, graphs):
    tokens, _ = run(tiny_model, tiny_frontend, graphs)
    assert tokens == eager_tokens


def test_graph_sampling_survives_preemption(tiny_model, tiny_frontend, eager_tokens):
    tokens, preemptions = run(tiny_model, tiny_frontend, "with sampling", num_blocks=NUM_BLOCKS_THAT_PREEMPT)
    assert preemptions > 0
    assert tokens == eager_tokens
