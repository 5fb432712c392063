"""Incremental feeds are cut into calls of at most FEED_FRAMES_PER_CALL frames (streams x frames
each), so a codec step's working memory stays bounded however many streams run ahead together;
the audio is the same as in uncut calls."""
from __future__ import annotations

import numpy as np
import pytest

import engine.audio.decoder
from engine.audio.decoder import _bounded_calls
from model.config import ModelConfig
from model.loader import load_family, load_frontend
from model.sampling import SamplingParams
from tests.engine.conftest import core_on_step_clock, drain, engine_config, wall_clock_capacity

STREAMS = 4


def test_groups_are_cut_at_the_bound_with_at_least_one_stream_per_call(monkeypatch):
    monkeypatch.setattr(engine.audio.decoder, "FEED_FRAMES_PER_CALL", 100)
    calls = list(_bounded_calls({64: list("abcd"), 8: list("efghijklmnopq"), 300: ["r"]}))
    assert calls == [list("a"), list("b"), list("c"), list("d"), list("efghijklmnop"), list("q"), ["r"]]


@pytest.fixture(scope="module")
def qwen3(chorus_cache):
    config = ModelConfig(model="tiny-random-qwen3", device="cpu", dtype="float32")
    return load_family(config), load_frontend(config)


def serve(family, frontend, monkeypatch) -> tuple[dict[str, np.ndarray], list[tuple[int, int]]]:
    """Four greedy streams far ahead of their listeners (cheap steps): each one's audio, and the
    (streams, frames each) of every incremental codec call."""
    core = core_on_step_clock(engine_config("tiny-random-qwen3", num_blocks=256, capacity=wall_clock_capacity(),
                                            max_num_seqs=8), family, step_cost=0.001, row_cost=0.001)
    decoder = core.audio.decoder
    step, shapes = decoder.incremental.step, []

    def recorded(frames, frames_before, states):
        shapes.append(tuple(frames.shape[:2]))
        return step(frames, frames_before, states)

    monkeypatch.setattr(decoder.incremental, "step", recorded)
    params = SamplingParams(temperature=0.0, max_tokens=150, min_tokens=150)
    for i in range(STREAMS):
        core.add_request(f"r{i}", frontend.prepare("Hello there, this is a longer reply.", "vivian"), params)
    audio = {rid: np.concatenate([c.pcm for c in chunks]) for rid, chunks in drain(core).items()}
    monkeypatch.undo()
    return audio, shapes


def test_streams_far_ahead_are_fed_within_the_bound_and_sound_the_same(qwen3, monkeypatch):
    family, frontend = qwen3
    whole, whole_shapes = serve(family, frontend, monkeypatch)
    assert max(rows * frames for rows, frames in whole_shapes) > 100  # the uncut run has calls to cut
    monkeypatch.setattr(engine.audio.decoder, "FEED_FRAMES_PER_CALL", 100)
    cut, cut_shapes = serve(family, frontend, monkeypatch)
    assert all(rows * frames <= 100 or rows == 1 for rows, frames in cut_shapes)
    assert sorted(cut) == sorted(whole) == [f"r{i}" for i in range(STREAMS)]
    for rid in whole:
        assert cut[rid].shape == whole[rid].shape
        np.testing.assert_allclose(cut[rid], whole[rid], atol=1e-4, rtol=0)
