"""Qwen3-TTS through the engine against the reference (qwen-tts 0.1.1): greedy codes identical in
every mode, the streamed codec's audio equal to the reference's whole decode, and each of 16
mixed streams in one batch given the codes it gets alone; and a voice Chorus's own cloner makes from
a clip speaks the reference's codes for a voice the reference cloned from that clip.

The golden fixture (tests/model/qwen3_tts/golden/) was written by the reference from the same
tiny checkpoints (`make qwen3-golden`); its sha256 check lives in test_tiny_random.py.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from model.config import ModelConfig
from model.families.qwen3_tts.cloner import CODES_ARRAY, VECTOR_ARRAY
from model.families.qwen3_tts.family import Qwen3Family
from model.families.qwen3_tts.frontend import Qwen3Frontend
from model.loader import load_family, load_frontend, resolve_model_path
from model.sampling import SamplingParams
from tests.engine.conftest import core_on_step_clock, drain, engine_config

GOLDEN = Path(__file__).parents[2] / "model" / "qwen3_tts" / "golden"
MANIFEST = json.loads((GOLDEN / "cases.json").read_text())
CASES = [c for c in MANIFEST["cases"] if not c["generate"]["do_sample"]]
CLIP_CASES = MANIFEST["clip_cases"]  # voices the reference cloned from a clip itself
MODELS = {"custom_voice": "tiny-random-qwen3", "base": "tiny-random-qwen3-base"}
AUDIO_TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def golden():
    with np.load(GOLDEN / "golden.npz") as arrays:
        return {name: arrays[name] for name in arrays.files}


class RecordingFamily:
    """Wraps a family's `accept` to keep every stream's frames (the engine hands out audio only)."""

    def __init__(self, family: Qwen3Family) -> None:
        self.frames: dict[int, list[list[int]]] = {}
        accept = family.accept

        def recording_accept(stream, output):
            update = accept(stream, output)
            if update.frames is not None:
                self.frames.setdefault(id(stream), []).append(list(output))
            return update

        family.accept = recording_accept  # type: ignore[method-assign]
        self.family = family


@pytest.fixture(scope="module")
def families(chorus_cache):
    return {kind: load_family(ModelConfig(model=name, device="cpu", dtype="float32")) for kind, name in MODELS.items()}


@pytest.fixture(scope="module")
def frontends(chorus_cache, tmp_path_factory):
    """Each checkpoint's front end, and a voice-design one: the custom-voice checkpoint declared a
    VoiceDesign model (the reference's custom-voice model with no speaker is that mode)."""
    frontends = {kind: load_frontend(ModelConfig(model=name)) for kind, name in MODELS.items()}
    design = tmp_path_factory.mktemp("qwen3") / "tiny-random-qwen3-design"
    shutil.copytree(resolve_model_path(MODELS["custom_voice"]), design)
    config = json.loads((design / "config.json").read_text())
    (design / "config.json").write_text(json.dumps({**config, "tts_model_type": "voice_design"}))
    frontends["voice_design"] = Qwen3Frontend.from_folder(design.name, design)
    return frontends


def prompt_of(case: dict, frontends: dict, golden: dict):
    """The case's prompt from Chorus's own front end (a case without a speaker is voice design)."""
    non_streaming = case["non_streaming_mode"]
    frontend = frontends[case["model"] if "speaker" in case or case["model"] == "base" else "voice_design"]
    if case["model"] == "base":
        reference = {}
        if "ref_text" in case:
            reference = dict(reference_text=case["ref_text"], reference_codes=golden[f"ref_codes_{case['name']}"])
        return frontend.prepare_clone(case["text"], speaker_vector=torch.from_numpy(golden["base_xvector"]),
                                      language=case["language"], non_streaming=non_streaming, **reference)
    voice = case.get("speaker") or frontend.voices[0]
    return frontend.prepare(case["text"], voice, language=case["language"], instructions=case.get("instruct"),
                            non_streaming=non_streaming)


def greedy(case: dict) -> SamplingParams:
    settings = case["generate"]
    return SamplingParams(temperature=0.0, repetition_penalty=settings["repetition_penalty"],
                          max_tokens=settings["max_new_tokens"])


def run(family: Qwen3Family, requests: dict[str, tuple]) -> tuple[dict, dict]:
    """Runs `requests` (id → (prompt, params)) together on one engine; returns each one's frames
    [n, 16] and its audio."""
    recorder = RecordingFamily(family)
    core = core_on_step_clock(engine_config(MODELS["custom_voice"], num_blocks=256), family)
    streams = {}
    for request_id, (prompt, params) in requests.items():
        core.add_request(request_id, prompt, params)
        streams[request_id] = core.requests.get(request_id).stream
    chunks = drain(core)
    try:
        frames = {rid: np.array(recorder.frames.get(id(stream), []), dtype=np.int64).reshape(-1, 16)
                  for rid, stream in streams.items()}
    finally:
        del family.accept
    audio = {rid: np.concatenate([c.pcm for c in chunks[rid]]) for rid in requests}
    return frames, audio


def expected_codes(case: dict, golden: dict, frames: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The reference's codes and ours to compare. NOTE: at the token cap the reference keeps
    N - 1 frames (its last code 0 never gets its other codes); Chorus keeps all N."""
    codes = golden[f"codes_{case['name']}"]
    if case["stop"] == "max_new_tokens":
        assert len(frames) == len(codes) + 1
        return codes, frames[: len(codes)]
    return codes, frames


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_greedy_codes_and_streamed_audio_match_the_reference(case, families, frontends, golden):
    family = families[case["model"]]
    prompt = prompt_of(case, frontends, golden)
    frames, audio = run(family, {"solo": (prompt, greedy(case))})
    reference, ours = expected_codes(case, golden, frames["solo"])
    np.testing.assert_array_equal(ours, reference)
    # Audio: the engine decodes the frames as they come (incrementally); the reference decoded
    # its codes in one call, an in-context clone's after the clip's codes (then cut them off),
    # which is where the engine's codec starts such a stream (its codec prefix).
    reference_audio = golden[f"{returned_audio(case)}{case['name']}"]
    assert np.abs(audio["solo"][: reference_audio.size] - reference_audio).max() <= AUDIO_TOLERANCE


def returned_audio(case: dict) -> str:
    """The golden array of the audio the reference returns for the case: an in-context clone's
    decoded after its reference codes and cut (audio_icl_), any other's alone (audio_)."""
    return "audio_icl_" if "ref_text" in case else "audio_"


def test_sixteen_mixed_streams_each_get_their_solo_codes(families, frontends, golden):
    """Speakers, instructions, voice design, languages, text modes and lengths mixed in one batch
    (prefill chunks beside decode rows, the depth stage over all of them): every stream's codes
    are the ones the reference gives it alone; the base checkpoint's clones likewise."""
    voices = [c for c in CASES if c["model"] == "custom_voice"]
    clones = [c for c in CASES if c["model"] == "base"]
    for model, picked in (("custom_voice", (voices * 2)[:16]), ("base", clones)):
        requests = {f"{index}-{case['name']}": (prompt_of(case, frontends, golden), greedy(case))
                    for index, case in enumerate(picked)}
        together, _ = run(families[model], requests)
        for (request_id, _), case in zip(requests.items(), picked):
            reference, ours = expected_codes(case, golden, together[request_id])
            np.testing.assert_array_equal(ours, reference, err_msg=request_id)


def clone_prompt(case: dict, frontends: dict, golden: dict):
    """The case's prompt in a voice Chorus's cloner makes from the case's clip (never the golden's
    x-vector or codes). NOTE: `prepare(clone=)` speaks a clone in streaming mode, the reference's
    default for generate_voice_clone, whatever `non_streaming` says: the non-streaming cases give
    the same clone's arrays to `prepare_clone`."""
    frontend = frontends["base"]
    clone = frontend.voice_cloner().clone(golden[case["clip"]], case.get("ref_text"))
    assert clone.mode == ("in_context" if "ref_text" in case else "x_vector")
    if not case["non_streaming_mode"]:
        return frontend.prepare(case["text"], "clip-voice", clone=clone, language=case["language"])
    codes = clone.arrays.get(CODES_ARRAY)
    return frontend.prepare_clone(case["text"], speaker_vector=torch.from_numpy(clone.arrays[VECTOR_ARRAY]),
                                  reference_text=clone.transcript, language=case["language"], non_streaming=True,
                                  reference_codes=None if codes is None else torch.from_numpy(codes))


@pytest.mark.parametrize("case", CLIP_CASES, ids=[c["name"] for c in CLIP_CASES])
def test_a_voice_cloned_from_a_clip_speaks_the_references_codes(case, families, frontends, golden):
    frames, audio = run(families["base"], {"solo": (clone_prompt(case, frontends, golden), greedy(case))})
    reference, ours = expected_codes(case, golden, frames["solo"])
    np.testing.assert_array_equal(ours, reference)
    # Audio: what generate_voice_clone returned (an in-context clone's: decoded after the clip's
    # codes, then cut; before the engine's codec started from the clip's state it differed by up
    # to 0.95 in the first frames, fading over ~1.8 s).
    returned = golden[f"{returned_audio(case)}{case['name']}"]
    assert np.abs(audio["solo"][: returned.size] - returned).max() <= AUDIO_TOLERANCE
