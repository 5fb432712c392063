"""The first-audio step: streams one output away from their first audio step alone, when cheap."""
from __future__ import annotations

import time

from model.sampling import SamplingParams

from .test_admission_core import OUTPUTS, fixed_cost


def add(core, tiny_frontend, rid: str) -> None:
    params = SamplingParams(temperature=0.8, seed=int(rid[1:]), max_tokens=OUTPUTS)
    core.add_request(rid, tiny_frontend.prepare(f"Sentence {rid}.", "tara"), params)


def calls_until_first_audio(core, rid: str) -> int:
    for calls in range(1, 200):
        if any(c.request_id == rid and len(c.pcm) for c in core.step()):
            return calls
    raise AssertionError(f"{rid} never had audio")


def playing_core(make_core, tiny_frontend, monkeypatch, coefficients):
    """A core with r0 playing and r1 just added, on fixed step costs, with the clock stopped (so
    r0's listener holds all the audio it was sent, however fast the steps go here)."""
    frozen = time.monotonic()
    monkeypatch.setattr(time, "monotonic", lambda: frozen)
    core = make_core(num_blocks=256)
    fixed_cost(core, 0.0)
    core.step_cost.coefficients = coefficients
    add(core, tiny_frontend, "r0")
    calls_until_first_audio(core, "r0")
    add(core, tiny_frontend, "r1")
    return core


def test_a_stream_about_to_have_its_first_audio_steps_again_when_a_step_of_it_is_cheap(make_core, tiny_frontend, monkeypatch):
    # A step costs 10 ms a row: one row is half a step of two.
    core = playing_core(make_core, tiny_frontend, monkeypatch, (0.0, 0.01, 0.0))
    steps_before = core.stats.steps
    calls = calls_until_first_audio(core, "r1")
    assert calls == core.admission.first_audio_outputs - 1
    assert core.stats.steps - steps_before == calls + 1  # the extra step was r1's alone


def test_no_first_audio_step_where_a_step_costs_the_same_whatever_its_rows(make_core, tiny_frontend, monkeypatch):
    core = playing_core(make_core, tiny_frontend, monkeypatch, (0.05, 0.0001, 0.0))
    steps_before = core.stats.steps
    assert calls_until_first_audio(core, "r1") == core.admission.first_audio_outputs
    assert core.stats.steps - steps_before == core.admission.first_audio_outputs


def test_no_first_audio_step_while_a_listener_would_run_dry_waiting_for_it(make_core, tiny_frontend, monkeypatch):
    core = playing_core(make_core, tiny_frontend, monkeypatch, (0.05, 0.0001, 0.0))  # no first-audio step yet
    while core.requests["r1"].seq.num_output_tokens < core.admission.first_audio_outputs - 1:
        core.step()
    core.step_cost.coefficients = (0.0, 0.01, 0.0)
    now = time.monotonic()
    assert core._first_audio_step_streams(now) == [core.requests["r1"].seq]
    core.requests["r0"].seq.deadline = now + 0.005  # r0's listener holds 5 ms; the step takes 10
    assert core._first_audio_step_streams(now) == []
    core.requests["r0"].seq.deadline = now - 0.005  # already dry: stalled whatever happens
    assert core._first_audio_step_streams(now) == [core.requests["r1"].seq]
