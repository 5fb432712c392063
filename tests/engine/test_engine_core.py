"""End to end on tiny-random through EngineCore: many streams, aborts, bad input, failures."""
from __future__ import annotations

import numpy as np
import pytest

from engine.errors import RequestRejected
from model.families.base import SpeechPrompt
from model.sampling import SamplingParams

from .conftest import drain, started

SAMPLES_PER_FRAME = 2048


def params(max_tokens: int, seed: int) -> SamplingParams:
    return SamplingParams(temperature=0.8, top_p=0.95, repetition_penalty=1.1, seed=seed, max_tokens=max_tokens)


def test_32_concurrent_streams_finish_with_audio_matching_their_frames(make_core, tiny_frontend):
    core = make_core(num_blocks=256, max_num_seqs=32, max_num_batched_tokens=256)
    streams = {}
    for i in range(32):
        rid = f"r{i}"
        prompt = tiny_frontend.prepare(f"Sentence number {i} " * (1 + i % 5), "tara")
        core.add_request(rid, prompt, params(max_tokens=7 * (2 + i % 6), seed=i))
        streams[rid] = started(core, rid).stream
    chunks = drain(core)
    assert sorted(chunks) == sorted(streams)
    for rid, got in chunks.items():
        assert [c.finished for c in got].count(True) == 1 and got[-1].finished
        assert got[-1].finish_reason in ("stop", "length") and got[-1].error is None
        audio = np.concatenate([c.pcm for c in got])
        assert len(audio) == streams[rid].num_frames * SAMPLES_PER_FRAME
        assert got[-1].metrics.audio_seconds == pytest.approx(len(audio) / 24000)
        assert np.isfinite(audio).all() and np.abs(audio).max() <= 1.0
    assert core.kv_manager.num_free_blocks == core.kv_manager.num_blocks


def test_aborting_half_mid_stream_frees_every_block(make_core, tiny_frontend):
    core = make_core(num_blocks=256)
    for i in range(16):
        core.add_request(f"r{i}", tiny_frontend.prepare("hello there " * 3, "leo"), params(200, i))
    for _ in range(12):
        core.step()
    for i in range(0, 16, 2):
        core.abort_request(f"r{i}")
    chunks = drain(core)
    for i in range(16):
        last = chunks[f"r{i}"][-1]
        assert last.finished
        assert last.finish_reason == ("abort" if i % 2 == 0 else "length")
    assert core.kv_manager.num_free_blocks == core.kv_manager.num_blocks
    assert not core.requests


def test_abort_of_unknown_id_is_a_noop(make_core):
    core = make_core()
    core.abort_request("never-added")
    assert not core.has_work


def test_prompt_longer_than_context_is_rejected_alone(make_core, tiny_frontend):
    core = make_core()
    core.add_request("ok", tiny_frontend.prepare("fine", "tara"), params(14, 1))
    too_long = SpeechPrompt(token_ids=[5] * (core.family.max_model_len + 3))
    with pytest.raises(RequestRejected) as info:
        core.add_request("long", too_long, params(14, 2))
    assert info.value.code == "context_length_exceeded"
    chunks = drain(core)
    assert list(chunks) == ["ok"] and chunks["ok"][-1].finish_reason == "length"


def test_the_reported_context_is_the_one_admission_enforces(make_core):
    core = make_core(num_blocks=16)  # 16 blocks of 16 tokens, below the model's own 8192
    limit = core.limits.context_tokens
    assert limit == 256
    core.add_request("fits", SpeechPrompt(token_ids=[5] * (limit - 1)), params(7, 1))
    with pytest.raises(RequestRejected, match="at most 255"):
        core.add_request("over", SpeechPrompt(token_ids=[5] * limit), params(7, 2))


def test_exception_inside_one_request_ends_only_that_request(make_core, tiny_frontend, monkeypatch):
    core = make_core()
    for i in range(4):
        core.add_request(f"r{i}", tiny_frontend.prepare("one two three", "tara"), params(35, i))
    family = core.family
    real_accept = family.accept
    bad_stream = started(core, "r2").stream

    def flaky_accept(stream, output):
        if stream is bad_stream and len(stream.token_ids) - stream.prompt_len == 5:
            raise RuntimeError("boom")
        return real_accept(stream, output)

    monkeypatch.setattr(family, "accept", flaky_accept)
    chunks = drain(core)
    assert chunks["r2"][-1].finish_reason == "error" and "boom" in chunks["r2"][-1].error
    for rid in ("r0", "r1", "r3"):
        assert chunks[rid][-1].finish_reason == "length"
        assert chunks[rid][-1].metrics.output_tokens == 35
    assert core.kv_manager.num_free_blocks == core.kv_manager.num_blocks


def test_bad_conditioning_fails_its_request_not_the_batch(make_core, tiny_frontend, monkeypatch):
    core = make_core()
    for i in range(3):
        core.add_request(f"r{i}", tiny_frontend.prepare("abc", "tara"), params(21, i))
    bad = started(core, "r1").stream
    bad.token_ids[2] = 10**9  # an id outside the vocabulary: the embedding lookup raises
    chunks = drain(core)
    assert chunks["r1"][-1].finish_reason == "error"
    assert chunks["r0"][-1].finish_reason == chunks["r2"][-1].finish_reason == "length"


def test_preemption_neither_loses_nor_duplicates_output(make_core, tiny_frontend):
    # The same seeded requests with a roomy pool and with one that forces preemption must give
    # the same tokens and the same amount of audio: preemption recomputes, it never regenerates.
    def run(num_blocks):
        core = make_core(num_blocks=num_blocks, max_num_seqs=8, max_num_batched_tokens=64)
        streams = {}
        for i in range(6):
            core.add_request(f"r{i}", tiny_frontend.prepare(f"voice {i}", "zoe"), params(70, 100 + i))
            streams[f"r{i}"] = started(core, f"r{i}").stream
        chunks = drain(core)
        preemptions = sum(c[-1].metrics.num_preemptions for c in chunks.values())
        audio = {rid: sum(len(c.pcm) for c in got) for rid, got in chunks.items()}
        return {rid: s.token_ids for rid, s in streams.items()}, audio, preemptions

    roomy_ids, roomy_audio, none = run(256)
    tight_ids, tight_audio, some = run(8)
    assert none == 0 and some > 0
    assert tight_ids == roomy_ids
    assert tight_audio == roomy_audio


def test_prefix_cache_hit_gives_same_output_as_cold_run(make_core, tiny_frontend):
    prompt = tiny_frontend.prepare("a shared voice prompt that spans several blocks " * 2, "tara")

    def run_once(core, rid):
        core.add_request(rid, prompt, SamplingParams(temperature=0.0, max_tokens=28))
        stream = started(core, rid).stream
        drain(core)
        return stream.token_ids

    core = make_core()
    cold = run_once(core, "cold")
    warm = run_once(core, "warm")
    assert core.kv_manager.prefix_cache_stats.hits > 0
    assert warm == cold
