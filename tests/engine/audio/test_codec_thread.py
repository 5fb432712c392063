"""The codec thread (CPU): audio decoded beside the next step's forward is the same audio, each
stream's in order, a step later but for its first chunk, which still decodes in the step it is
ready; the step's own frames never reach the decoder while the thread works."""
from __future__ import annotations

import dataclasses
import threading

import numpy as np

from engine.core import EngineCore
from model.sampling import SamplingParams
from tests.engine.conftest import core_on_step_clock, drain, engine_config

TEXTS = ("Hello there.", "A second, longer sentence to speak.", "Third.")


def run(frontend, codec_thread: bool, model: str = "tiny-random") -> tuple[dict[str, np.ndarray], EngineCore]:
    config = engine_config(model)
    config.streaming = dataclasses.replace(config.streaming, codec_thread=codec_thread)
    core = core_on_step_clock(config)
    chunks: dict[str, list] = {}
    for i, text in enumerate(TEXTS):
        core.add_request(f"r{i}", frontend.prepare(text, frontend.voices[0]),
                         SamplingParams(temperature=0.8, seed=i, max_tokens=60))
        for chunk in core.step():  # staggered: later streams start while earlier ones speak
            chunks.setdefault(chunk.request_id, []).append(chunk)
    for request_id, more in drain(core).items():
        chunks.setdefault(request_id, []).extend(more)
    return {rid: np.concatenate([c.pcm for c in cs]) for rid, cs in chunks.items()}, core


def test_the_same_audio_with_and_without_the_codec_thread(tiny_frontend):
    alone, _ = run(tiny_frontend, codec_thread=False)
    beside, core = run(tiny_frontend, codec_thread=True)
    assert core.audio.decodes_beside and set(alone) == set(beside)
    for request_id in alone:
        np.testing.assert_allclose(beside[request_id], alone[request_id], atol=1e-5)
    assert core.kv_manager.num_free_blocks == core.kv_manager.num_blocks


def first_audio_step(tiny_frontend, codec_thread: bool) -> tuple[int, list[str]]:
    """The step in which a lone request's first audio leaves, and the thread of every decode
    (with whether it decoded first chunks only)."""
    config = engine_config("tiny-random")
    config.streaming = dataclasses.replace(config.streaming, codec_thread=codec_thread)
    core = core_on_step_clock(config)
    threads, launch = [], core.audio.decoder.launch

    def launching(*args, first_chunks_only=False, **kwargs):
        threads.append((threading.current_thread().name, first_chunks_only))
        return launch(*args, first_chunks_only=first_chunks_only, **kwargs)

    core.audio.decoder.launch = launching
    core.add_request("r", tiny_frontend.prepare(TEXTS[1], tiny_frontend.voices[0]), SamplingParams(max_tokens=40))
    for step in range(1, 200):
        if any(len(chunk.pcm) for chunk in core.step()):
            drain(core)
            return step, threads
    raise AssertionError("no audio")


def test_a_first_chunk_decodes_in_its_step_the_rest_beside_the_forward(tiny_frontend):
    alone, _ = first_audio_step(tiny_frontend, codec_thread=False)
    beside, threads = first_audio_step(tiny_frontend, codec_thread=True)
    assert beside == alone  # the first audio waits no step
    # In the step: one decode, of first chunks only; every other decode on the thread, of all.
    assert threads.count(("MainThread", True)) == 1
    assert set(threads) == {("MainThread", True), ("chorus-codec_0", False)}


def test_in_the_step_only_streams_without_audio_decode(tiny_frontend):
    """A new stream's first chunk decodes in the step; a playing stream's frames wait for the
    thread even in that step (else every step with a new stream would decode everything in it)."""
    config = engine_config("tiny-random")
    config.streaming = dataclasses.replace(config.streaming, codec_thread=True)
    core = core_on_step_clock(config)
    core.add_request("old", tiny_frontend.prepare(TEXTS[1], tiny_frontend.voices[0]), SamplingParams(max_tokens=60))
    for _ in range(200):
        if any(len(chunk.pcm) for chunk in core.step()):
            break
    core.step()  # the old stream's audio now comes from the thread
    core.add_request("new", tiny_frontend.prepare(TEXTS[1], tiny_frontend.voices[0]), SamplingParams(max_tokens=60))
    decoded_in_step = []
    first_chunks = core.audio.decoder.decode_first_chunks

    def recording(now):
        chunks = first_chunks(now)
        decoded_in_step.append(set(chunks))
        return chunks

    core.audio.decoder.decode_first_chunks = recording
    for _ in range(200):
        if decoded_in_step:
            break
        core.step()
    assert decoded_in_step == [{"new"}]
    drain(core)


def test_joe_streams_the_same_audio_with_the_codec_thread():
    """joe's incremental decoder (the CPU's default path) through the thread."""
    from tests.voice_packages import require_voice_packages

    require_voice_packages()
    from model.config import ModelConfig
    from model.loader import load_frontend

    frontend = load_frontend(ModelConfig(model="joe"))
    alone, _ = run(frontend, codec_thread=False, model="joe")
    beside, _ = run(frontend, codec_thread=True, model="joe")
    for request_id in alone:
        np.testing.assert_allclose(beside[request_id], alone[request_id], atol=1e-4)
