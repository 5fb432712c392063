"""vLLM-Omni serving Qwen3-TTS: the peer of the Qwen3-TTS GPU run (benchmarks/GPU_RUN.md), measured
by the same client, texts and figures as every other system of `benchmarks/serving.py`.

The server is vLLM-Omni's own command, `vllm serve <folder> --omni --trust-remote-code`, on the
checkpoint folder Chorus loads (a built-in name such as `random-qwen3-0.6b` resolves to the folder
Chorus wrote). The pair that runs on the device's torch 2.11 is vLLM 0.26.0 + vLLM-Omni 0.26.0.
Its speech route, as that release defines it (`OpenAICreateSpeechRequest` in
vllm_omni/entrypoints/openai/protocol/audio.py, and `create_speech` in serving_speech.py):

    POST /v1/audio/speech {"model": <folder>, "input": ..., "voice": ..., "response_format": "pcm",
                           "stream_format": "audio"}
    → 200, 16-bit mono PCM at the codec's rate (24 kHz for the released checkpoints), each codec
      chunk sent as soon as it is decoded
      ("stream": true alone would select its SSE events; "stream_format": "audio" the raw bytes)
    GET /health → 200 once the engine is up

Language, speed and sampling are left to the server's defaults, as Chorus's driver leaves them:
each side reads the checkpoint's generation config.
"""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Sequence

from benchmarks.audio_bodies import PcmBody
from benchmarks.corpus import BenchRequest
from benchmarks.http_drivers import HttpDriver
from benchmarks.server_process import HOST, ServerProcess

VLLM_OMNI_REQUIREMENTS = ("vllm==0.26.0", "vllm-omni==0.26.0")
# Loading a checkpoint, profiling memory and capturing its graphs takes minutes on a first start.
STARTUP_TIMEOUT_S = 1200.0


def vllm_omni_command(folder: Path, port: int, flags: Sequence[str] = ()) -> list[str]:
    """The `vllm serve` command line for `folder`; `flags` (e.g. `--deploy-config <yaml>`, which
    vLLM-Omni's Qwen3-TTS guide names for its version) go last."""
    vllm = shutil.which("vllm")
    if vllm is None:
        raise RuntimeError(f"no `vllm` command on PATH: the vllm-omni system needs "
                           f"`pip install {' '.join(VLLM_OMNI_REQUIREMENTS)}` (benchmarks/GPU_RUN.md)")
    return [vllm, "serve", str(folder), "--omni", "--trust-remote-code", "--host", HOST, "--port", str(port), *flags]


def vllm_omni_server(folder: Path, port: int, flags: Sequence[str] = ()) -> ServerProcess:
    return ServerProcess("vllm-omni", vllm_omni_command(folder, port, flags), port, "/health",
                         startup_timeout_s=STARTUP_TIMEOUT_S)


def vllm_omni_body(request: BenchRequest, model: str) -> dict:
    """One request's JSON body: raw PCM streamed as it is decoded. `model` is the served name,
    which for `vllm serve <folder>` is the folder as given."""
    return {"model": model, "input": request.text, "voice": request.voice, "response_format": "pcm",
            "stream_format": "audio"}


def codec_sample_rate(folder: Path) -> int:
    """The rate vLLM-Omni streams `folder`'s audio at: its 12 Hz codec's output, unresampled."""
    from model.codecs.qwen3_12hz_config import Qwen3CodecConfig
    from model.families.qwen3_tts.loading import resolve_codec_path

    return Qwen3CodecConfig.from_folder(resolve_codec_path(folder, None)).sample_rate


def vllm_omni_driver(base_url: str, folder: Path) -> HttpDriver:
    """The client of `vllm serve <folder>`: its served model name is the folder as given."""
    return HttpDriver("vllm-omni pcm", base_url, "/v1/audio/speech",
                      lambda request: vllm_omni_body(request, str(folder)), PcmBody, codec_sample_rate(folder))
