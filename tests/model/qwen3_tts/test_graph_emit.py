"""Qwen3GraphEmitter (model/families/qwen3_tts/graph_emit.py): the decode graph's head, code 0 and
depth stage from persistent buffers give the frames the family's eager `head` + `emit` give.

Twin streams (same prompts, params and seeds) go through both paths step after step, over a
padded batch whose rows change (streams join, leave, end), with seeded sampling, a greedy row, the
two-frame minimum, a repetition penalty over the codes drawn so far and a live stream whose text
has not ended (end of speech masked). The graph path is called as the decode graph calls it
(prepare, then emit over the padded rows); here it runs eagerly, which is all but the capture.
"""
from __future__ import annotations

import pytest
import torch

from model.config import ModelConfig
from model.families.qwen3_tts.family import Qwen3Family
from model.loader import load_family, load_frontend

PADDED = 8
TEXTS = ("Hello there.", "A second voice joins.", "Short.", "The last one speaks a little longer than the rest.")


@pytest.fixture(scope="module")
def family(chorus_cache) -> Qwen3Family:
    family = load_family(ModelConfig(model="tiny-random-qwen3", device="cpu", dtype="float32"))
    assert isinstance(family, Qwen3Family)
    family.reserve(PADDED)
    return family


@pytest.fixture(scope="module")
def frontend(chorus_cache):
    return load_frontend(ModelConfig(model="tiny-random-qwen3"))


def requests(frontend):
    """(prompt, params) per stream: seeded sampling (the checkpoint's settings), one greedy."""
    defaults = frontend.default_sampling()
    voice = frontend.voices[0]
    params = [defaults.replace(seed=11), defaults.replace(seed=12), defaults.replace(temperature=0.0),
              defaults.replace(seed=14, repetition_penalty=1.3)]
    return [(frontend.prepare(text, voice), p) for text, p in zip(TEXTS, params)]


def test_graph_emit_gives_the_eager_frames(family, frontend):
    eager_streams = [family.new_stream(prompt, p) for prompt, p in requests(frontend)]
    graph_streams = [family.new_stream(prompt, p) for prompt, p in requests(frontend)]
    # One live stream whose text goes on: neither path may end it.
    eager_streams[0].text_complete = graph_streams[0].text_complete = False
    emitter = family.graph_emitter(PADDED)
    generator = torch.Generator().manual_seed(0)
    # Which streams share each step: joins, a leave and a return, a lone row.
    schedule = [[0, 1], [0, 1, 2], [0, 1, 2, 3], [1, 3], [3], [0, 1, 2, 3], [2, 0, 3, 1]] + [[0, 1, 2, 3]] * 5
    compared, finished = 0, set()
    for rows in schedule:
        live = [i for i in rows if i not in finished]
        if not live:
            continue
        hidden = torch.randn(len(live), family.backbone.hidden_size, generator=generator)
        eager = family.emit(family.head(hidden), [eager_streams[i] for i in live])
        padding = torch.randn(PADDED - len(live), family.backbone.hidden_size, generator=generator)
        emitter.prepare([graph_streams[i] for i in live], [True] * len(live), PADDED)
        with torch.inference_mode():  # as the decode graph runs
            graph = emitter.outputs(emitter.emit(torch.cat((hidden, padding))))[: len(live)]
        assert graph == eager, f"rows {live}"
        for i, frame in zip(live, graph):
            ended = family.accept(eager_streams[i], frame).finished
            assert family.accept(graph_streams[i], frame).finished == ended
            if ended:
                finished.add(i)
        compared += len(live)
    assert compared > 30
    assert all(s.num_frames > 0 for s in graph_streams)


def test_eos_stays_masked_while_the_text_goes_on(family, frontend, monkeypatch):
    """Rows whose text has not ended never draw end of speech, however likely the head makes it."""
    (prompt, params), *_ = requests(frontend)
    streams = [family.new_stream(prompt, params.replace(seed=seed)) for seed in range(4)]
    for stream in streams[:2]:
        stream.text_complete = False
    for stream in streams:
        for code in range(3):  # past the two-frame minimum
            stream.sampling.append(code)
    emitter = family.graph_emitter(PADDED)
    emitter.prepare(streams, [True] * 4, 4)
    eos = family.config.codec.eos
    hidden = torch.randn(4, family.backbone.hidden_size)
    # A head that favours end of speech above everything: the rows free to end do.
    backbone = family.backbone
    original = backbone.compute_logits

    def eos_heavy(h):
        logits = original(h)
        logits[:, eos] = logits.max() + 50.0
        return logits

    monkeypatch.setattr(backbone, "compute_logits", eos_heavy)
    with torch.inference_mode():
        frames = emitter.outputs(emitter.emit(hidden))
    assert [frame[0] == eos for frame in frames] == [False, False, True, True]
    # The first live text ends: the next step of the same rows may end that stream too.
    streams[0].text_complete = True
    emitter.prepare(streams, [True] * 4, 4)
    with torch.inference_mode():
        frames = emitter.outputs(emitter.emit(hidden))
    assert [frame[0] == eos for frame in frames] == [True, False, True, True]


def test_the_scratch_cache_a_graph_emitter_holds_is_never_replaced(family):
    """Graphs captured over the predictor's scratch keep its addresses: once an emitter exists, a
    larger batch is an error instead of a new cache under the graphs."""
    family.graph_emitter(PADDED)
    scratch = family.predictor._scratch[0]
    family.reserve(PADDED)  # what it holds already: fine
    with pytest.raises(RuntimeError, match="for good"):
        family.reserve(PADDED + 1)
    assert family.predictor._scratch[0] is scratch and family.predictor.max_rows == PADDED


def test_with_xformers_the_code_predictor_decodes_with_the_triton_kernel(chorus_cache):
    """xformers' prefill path builds its mask from host lists, which a CUDA graph cannot capture,
    and the predictor's sub-steps (two positions at most) run inside the decode graph."""
    from model.attention.triton_backend import TritonBackend
    from model.attention.xformers_backend import XformersPrefillBackend

    family = load_family(ModelConfig(model="tiny-random-qwen3", device="cpu", dtype="float32",
                                     attention_backend="xformers"))
    assert isinstance(family.backbone.attention_backend, XformersPrefillBackend)
    predictor_backends = {type(layer.self_attn.attention) for layer in family.predictor.layers}
    assert predictor_backends == {TritonBackend}
