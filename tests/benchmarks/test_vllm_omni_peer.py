"""The Qwen3-TTS GPU run's peer (benchmarks/vllm_omni_peer.py): what the serving benchmark sends
vLLM-Omni is what vLLM-Omni 0.26.0's speech route takes as a raw PCM stream, checked against that
release's own request model (`make install-dev` puts its wheel, without dependencies, in
.venv/peers/), and its server is started on the checkpoint folder Chorus loads."""
from __future__ import annotations

import importlib.util
import json
import sys
import warnings
from pathlib import Path

import pytest

from benchmarks import serving, vllm_omni_peer
from benchmarks.serving import DEFAULT_SYSTEMS, checkpoint_folder, parse_args, workload
from benchmarks.serving_report import peer_versions, targets
from benchmarks.vllm_omni_peer import VLLM_OMNI_REQUIREMENTS, vllm_omni_body, vllm_omni_command, vllm_omni_driver

PROTOCOL = Path(sys.prefix) / "peers" / "vllm-omni-0.26.0" / "vllm_omni/entrypoints/openai/protocol/audio.py"


@pytest.fixture(scope="module")
def speech_request_model():
    """vLLM-Omni 0.26.0's OpenAICreateSpeechRequest, from its own file (which imports only pydantic
    and numpy: the package itself would import vLLM)."""
    if not PROTOCOL.is_file():
        pytest.skip(f"vLLM-Omni's wheel is not at {PROTOCOL.parents[3]}: `make install-dev` puts it there")
    spec = importlib.util.spec_from_file_location("vllm_omni_speech_protocol", PROTOCOL)
    module = importlib.util.module_from_spec(spec)
    with warnings.catch_warnings():  # its own pydantic deprecations, not this project's
        warnings.simplefilter("ignore", DeprecationWarning)
        spec.loader.exec_module(module)
    return module.OpenAICreateSpeechRequest


def test_every_workload_body_is_a_raw_pcm_stream_to_vllm_omni(speech_request_model):
    folder = "/models/Qwen3-TTS-12Hz-0.6B-CustomVoice"
    for request in workload("vivian"):
        parsed = speech_request_model.model_validate(vllm_omni_body(request, folder))
        assert parsed.is_raw_audio_stream() and not parsed.is_sse_stream()  # bytes, not SSE events
        assert (parsed.model, parsed.input, parsed.voice) == (folder, request.text, "vivian")
        assert parsed.response_format == "pcm" and parsed.speed == 1.0 and parsed.language is None


def test_the_request_model_refuses_what_the_route_refuses(speech_request_model):
    # The check above can fail: a streamed format other than pcm or wav is refused there.
    body = vllm_omni_body(workload("vivian")[0], "/models/x") | {"response_format": "mp3"}
    with pytest.raises(ValueError, match="pcm"):
        speech_request_model.model_validate(body)


def test_the_server_command_is_vllm_omnis_own_on_the_folder(monkeypatch):
    monkeypatch.setattr(vllm_omni_peer.shutil, "which", lambda name: f"/opt/venv/bin/{name}")
    command = vllm_omni_command(Path("/models/q"), 8091, ["--deploy-config", "qwen3_tts.yaml"])
    assert command == ["/opt/venv/bin/vllm", "serve", "/models/q", "--omni", "--trust-remote-code",
                       "--host", "127.0.0.1", "--port", "8091", "--deploy-config", "qwen3_tts.yaml"]


def test_without_vllm_the_run_says_what_to_install(monkeypatch):
    monkeypatch.setattr(vllm_omni_peer.shutil, "which", lambda name: None)
    with pytest.raises(RuntimeError, match=" ".join(VLLM_OMNI_REQUIREMENTS)):
        vllm_omni_command(Path("/models/q"), 8091)


def test_the_peer_serves_the_folder_chorus_loads(chorus_cache):
    args = parse_args(["--systems", "chorus", "vllm-omni", "--model", "tiny-random-qwen3", "--voice", "vivian",
                       "--vllm-omni-flags", "--max-num-seqs 64"])
    assert args.systems == ["chorus", "vllm-omni"] and args.vllm_omni_flags.split() == ["--max-num-seqs", "64"]
    folder = checkpoint_folder(args.model)
    assert json.loads((folder / "config.json").read_text())["model_type"] == "qwen3_tts"
    assert serving.PEER_FORMATS["vllm-omni"] == ("pcm",)
    # Its client counts samples at the folder's codec rate (the test model's codec: 8 kHz).
    driver = vllm_omni_driver("http://127.0.0.1:8091", folder)
    assert driver.sample_rate == 8000 and driver.request_body(workload("vivian")[0])["model"] == str(folder)
    # A run that names no systems is the built-in voice's: no GPU peer.
    assert parse_args([]).systems == list(DEFAULT_SYSTEMS) and "vllm-omni" not in DEFAULT_SYSTEMS


def test_the_results_name_the_version_of_each_peer_that_ran():
    def report(*systems: str) -> dict:
        return {"systems": [{"system": system} for system in systems]}

    assert peer_versions(report("chorus")) == {}
    # A GPU image need not have Piper, nor this venv vLLM-Omni (its wheel lies outside the path).
    assert peer_versions(report("chorus", "vllm-omni")) == {"vllm-omni": "not installed"}
    assert set(peer_versions(report("chorus", "piper", "piper-sentences"))) == {"piper-tts"}


def test_the_results_hold_chorus_against_vllm_omni_at_each_level_both_ran():
    def system(name: str, levels: dict[int, tuple[float, float, float]]) -> dict:
        closed = [{"load": load, "ttfa_p50": p50, "ttfa_p95": p95, "audio_s_per_wall_s": rate}
                  for load, (p50, p95, rate) in levels.items()]
        return {"system": name, "closed_loop": closed, "capacity_streams": 0, "input_length": [],
                "loads": {"burst_multiples": []}, "bursts": []}

    chorus = system("chorus", {1: (0.05, 0.08, 1.0), 8: (0.30, 0.60, 7.0), 64: (1.2, 2.0, 40.0)})
    omni = system("vllm-omni", {1: (0.071, 0.09, 1.0), 8: (0.287, 0.5, 7.5)})  # no 64-stream level
    checks = {c["target"]: c for c in targets({"systems": [chorus, omni]})}
    assert checks["TTFA p50 at 1 streams ÷ vLLM-Omni's"]["met"] is True
    assert checks["TTFA p50 at 8 streams ÷ vLLM-Omni's"]["value"] == pytest.approx(0.30 / 0.287)
    assert checks["TTFA p95 at 8 streams ÷ vLLM-Omni's"]["met"] is False
    assert checks["audio s per wall s at 8 streams ÷ vLLM-Omni's"]["value"] == pytest.approx(7.0 / 7.5)
    assert not [name for name in checks if "64 streams" in name]  # a level only one side ran
    assert not [name for name in targets({"systems": [chorus]}) if "vLLM-Omni" in name["target"]]
