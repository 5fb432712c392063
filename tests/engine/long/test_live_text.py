"""Live text: a Qwen3-TTS request whose text arrives while it speaks (its streaming text track).
Whatever the text's timing, the stream speaks the codes of its whole text read in streaming mode;
while it has read all it was given it takes no step and its audio made so far leaves at once."""
from __future__ import annotations

from dataclasses import replace

import pytest

from model.config import ModelConfig
from model.loader import load_family, load_frontend
from model.sampling import SamplingParams
from tests.engine.conftest import core_on_step_clock, drain, engine_config, started, wall_clock_capacity

MODEL = "tiny-random-qwen3"
GREEDY = SamplingParams(temperature=0.0, max_tokens=40)
PIECES = ("Hello", " there,", " this is", " text that", " comes in", " while it", " speaks.")


@pytest.fixture(scope="module")
def qwen3(chorus_cache):
    config = ModelConfig(model=MODEL, device="cpu", dtype="float32")
    return load_family(config), load_frontend(config)


def make_core(family):
    config = engine_config(MODEL, num_blocks=256, capacity=wall_clock_capacity(), max_num_seqs=8)
    return core_on_step_clock(config, family, step_cost=0.001, row_cost=0.001)


def recorded_codes(family) -> dict[int, list[list[int]]]:
    """Every stream's frames by stream identity, as the family accepts them."""
    frames: dict[int, list[list[int]]] = {}
    accept = family.accept

    def recording(stream, output):
        update = accept(stream, output)
        if update.frames is not None:
            frames.setdefault(id(stream), []).append(list(output))
        return update

    family.accept = recording
    return frames


def codes_of(family, prompt, params=GREEDY) -> list[list[int]]:
    frames = recorded_codes(family)
    core = make_core(family)
    core.add_request("whole", prompt, params)
    stream = started(core, "whole").stream
    drain(core)
    del family.accept
    return frames[id(stream)]


@pytest.mark.parametrize("gaps", [(0, 0, 0, 0, 0, 0), (3, 1, 5, 0, 2, 9), (12, 12, 12, 12, 12, 12)],
                         ids=["all-at-once", "uneven", "slower-than-speech"])
def test_live_text_speaks_what_it_read(qwen3, gaps):
    """Pieces arriving after `gaps` steps each (the stream runs out of text and, its listener
    having little or nothing to play, reads fillers): in one engine request, the codes of a
    whole prompt that reads what the live stream read, position by position, and does not end
    before the live text did; with all the text there from the start, exactly the whole text's
    codes in streaming mode."""
    family, frontend = qwen3
    first, rest = PIECES[0], PIECES[1:]
    whole = frontend.prepare("".join(PIECES), "ryan", non_streaming=False)
    live = frontend.prepare(first, "ryan", live=True)
    pieces = [frontend.live_text_ids(piece) for piece in rest]
    # The pieces tokenize as the whole does (each starts at a word): the inputs are the same.
    assert live.trailing_ids + [i for ids in pieces for i in ids] == whole.trailing_ids[:-1]
    params = GREEDY.replace(max_tokens=120)
    frames = recorded_codes(family)
    core = make_core(family)
    core.add_request("live", live, params)
    stream = started(core, "live").stream
    for gap, ids in zip(gaps, pieces):
        for _ in range(gap):
            core.step()
        core.extend_text("live", ids, final=ids is pieces[-1])
    final_at = stream.num_frames  # the frames made before its text ended, which could not be its end
    drain(core)
    del family.accept
    pad = family.config.text.tts_pad
    text_read = [i for i in stream.trailing[: stream.trailing.index(family.config.text.tts_eos)] if i != pad]
    assert text_read == whole.trailing_ids[:-1]  # every piece read, in order, once
    read_whole = replace(whole, trailing_ids=stream.trailing)
    assert frames[id(stream)] == codes_of(family, read_whole, params.replace(min_tokens=final_at))
    fills = stream.trailing.index(family.config.text.tts_eos) - len(text_read)
    if max(gaps) == 12:  # slower than it reads: it ran out, and its listener had little to play
        assert fills > 0
    if not any(gaps):
        assert fills == 0 and frames[id(stream)] == codes_of(family, whole, params)


def test_a_waiting_stream_reads_fillers_only_while_its_listener_runs_low(qwen3):
    """Out of text, a stream reads a filler each step until its listener holds more than the
    feed level, then takes no step until the listener runs low again (the engine wakes itself
    for that), and reads at most MAX_FILLS_IN_A_ROW in a row; its text resets the count."""
    from model.families.qwen3_tts.stream import MAX_FILLS_IN_A_ROW

    family, frontend = qwen3
    core = make_core(family)
    low = core.config.capacity.feed_slack_seconds
    core.add_request("live", frontend.prepare("Hi", "ryan", live=True), SamplingParams(temperature=0.0, max_tokens=500))
    request = started(core, "live")
    drain(core)  # fillers until its listener holds more than `low`, then idle
    stream, listener = request.stream, request.listener
    assert stream.fills_in_a_row > 0 and request.seq.awaiting_input and not core.has_work
    # A filler's frame is not the text's: each adds an output to the budget.
    room = core.limits.context_tokens - request.seq.num_prompt_tokens
    assert request.fillers == stream.fills_in_a_row and request.seq.max_output_tokens == min(500 + request.fillers, room)
    assert listener.slack(core.clock()) > low
    wait = core.seconds_until_work()
    assert wait == pytest.approx(listener.slack(core.clock()) - low)
    core.clock.advance(wait)
    assert core.has_work
    fills = stream.fills_in_a_row
    core.step()
    assert stream.fills_in_a_row == fills + 1
    while stream.fills_in_a_row < MAX_FILLS_IN_A_ROW:
        core.clock.advance(max(core.seconds_until_work(), 0.0) + 0.01)
        drain(core)
    core.clock.advance(10.0)  # the listener has run dry, but the stream has read all the fillers it may
    assert not core.has_work and core.seconds_until_work() == float("inf")
    core.extend_text("live", frontend.live_text_ids(" there"), final=False)
    assert stream.fills_in_a_row == 0 and core.has_work
    core.abort_request("live")
    drain(core)


def test_a_stream_out_of_text_takes_no_step_and_sends_its_audio(qwen3):
    family, frontend = qwen3
    core = make_core(family)
    core.add_request("live", frontend.prepare("Hi", "ryan", live=True), GREEDY)
    seq = started(core, "live").seq
    # Out of text, it reads fillers while its listener runs low, then is idle once its audio is
    # out: no work until text comes or its listener runs low again.
    chunks = drain(core).get("live", [])
    tokens = seq.num_computed_tokens
    assert seq.awaiting_input and not core.has_work and core.seconds_until_work() > 0
    assert not drain(core) and seq.num_computed_tokens == tokens
    sent = sum(len(c.pcm) for c in chunks)
    assert sent == seq.num_output_tokens * family.codec.samples_per_frame  # every frame made is heard
    core.extend_text("live", frontend.live_text_ids(" there."), final=True)
    assert core.has_work and not seq.awaiting_input
    chunks = drain(core)["live"]
    assert chunks[-1].finished and chunks[-1].finish_reason in ("stop", "length")
    assert core.kv_manager.num_free_blocks == core.kv_manager.num_blocks


def test_aborting_a_waiting_stream_frees_it(qwen3):
    family, frontend = qwen3
    core = make_core(family)
    core.add_request("live", frontend.prepare("Hi", "ryan", live=True), GREEDY)
    seq = started(core, "live").seq
    while not seq.awaiting_input:
        core.step()
    core.abort_request("live")
    assert drain(core)["live"][-1].finish_reason == "abort"
    assert core.kv_manager.num_free_blocks == core.kv_manager.num_blocks
    assert core.audio.decoder.state_pool.num_free == core.audio.decoder.state_pool.num_slots


def test_text_for_a_request_that_cannot_take_it(qwen3):
    """A whole prompt, or a live one after its final piece, takes no more text: the request ends
    with an error (never the engine); unknown or ended ids are ignored."""
    family, frontend = qwen3
    core = make_core(family)
    core.add_request("whole", frontend.prepare("Hi there.", "ryan"), GREEDY)
    core.extend_text("whole", [1, 2], final=False)
    assert core.requests.get("whole").error and "complete" in core.requests.get("whole").error
    core.extend_text("nobody", [1], final=True)
    core.add_request("live", frontend.prepare("Hi", "ryan", live=True), GREEDY)
    core.extend_text("live", frontend.live_text_ids(" there."), final=True)
    core.extend_text("live", [1], final=True)
    assert core.requests.get("live").error
    drain(core)
    assert core.kv_manager.num_free_blocks == core.kv_manager.num_blocks


def test_an_in_context_clone_takes_no_live_text(chorus_cache):
    from benchmarks.voice_prefix import synthetic_voice

    frontend = load_frontend(ModelConfig(model="tiny-random-qwen3-base"))
    cloner = frontend.voice_cloner()
    clip = synthetic_voice(2.0)
    timbre, whole = cloner.clone(clip), cloner.clone(clip, "A voice.")
    assert frontend.takes_live_text(timbre) and not frontend.takes_live_text(whole)
    assert frontend.prepare("Hi", "v", clone=timbre, live=True).text_complete is False
    with pytest.raises(ValueError, match="no live text"):
        frontend.prepare("Hi", "v", clone=whole, live=True)


def test_families_that_need_whole_text_refuse_live_text(tiny_model, tiny_frontend):
    from tests.engine.conftest import engine_config as config_of

    core = core_on_step_clock(config_of(tiny_model), step_cost=0.001, row_cost=0.001)
    core.add_request("r", tiny_frontend.prepare("Hello there.", tiny_frontend.voices[0]), GREEDY)
    core.extend_text("r", [1], final=True)
    assert "whole text" in core.requests.get("r").error
    assert not tiny_frontend.takes_live_text()
    with pytest.raises(ValueError):
        tiny_frontend.live_text_ids("more")


def test_the_last_piece_sets_the_budget_of_the_whole_text(qwen3):
    """A live request speaks on a whole turn's budget until its text ends; the last piece's
    `max_tokens` (its text's) then bounds it, never below one more output, within the context."""
    family, frontend = qwen3
    core = make_core(family)
    core.add_request("live", frontend.prepare("Hi", "ryan", live=True), SamplingParams(temperature=0.0, max_tokens=500))
    request = started(core, "live")
    for _ in range(5):
        core.step()
    made = request.seq.num_output_tokens
    core.extend_text("live", frontend.live_text_ids(" there."), final=True, max_tokens=1)
    assert request.seq.max_output_tokens == made + 1
    drain(core)
    assert request.seq.num_output_tokens <= made + 1
    core.add_request("long", frontend.prepare("Hi", "ryan", live=True), SamplingParams(temperature=0.0, max_tokens=500))
    core.extend_text("long", frontend.live_text_ids(" there."), final=True, max_tokens=10**6)
    seq = started(core, "long").seq
    assert seq.max_output_tokens == core.limits.context_tokens - seq.num_prompt_tokens
    drain(core)
