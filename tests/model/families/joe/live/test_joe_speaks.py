"""`chorus serve` with no flags (what `make serve` runs) answers an OpenAI-shaped request with
speech a recogniser understands."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import httpx
import numpy as np
import pytest

from tests.voice_packages import require_voice_packages

require_voice_packages()
pytest.importorskip("pocketsphinx")

from benchmarks.asr import Transcriber  # noqa: E402
from model.families.joe.prompt import JoePromptFrontend  # noqa: E402
from model.families.joe.student import SHIPPED_WEIGHTS, read_config  # noqa: E402
from tests.model.families.joe.test_joe_speaks import SPOKEN, word_recall  # noqa: E402


@pytest.fixture(scope="module")
def transcriber() -> Transcriber:
    return Transcriber()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_default_server_speaks(transcriber, tmp_path):
    """`chorus serve` with no model flag, as `make serve` starts it, queried like an OpenAI client."""
    port = free_port()
    env = {**os.environ, "CHORUS_API_KEY": ""}
    env.pop("CHORUS_API_KEY")
    log = (tmp_path / "server.log").open("w")
    server = subprocess.Popen([sys.executable, "-m", "api.cli", "serve", "--port", str(port)],
                              stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            assert server.poll() is None, (tmp_path / "server.log").read_text()
            try:
                if httpx.get(f"{url}/ready", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.5)
        text = " ".join(SPOKEN)
        body = {"model": "tts-1", "voice": "alloy", "input": text, "response_format": "pcm"}
        response = httpx.post(f"{url}/v1/audio/speech", json=body, timeout=120)
        assert response.status_code == 200, response.text
        audio = np.frombuffer(response.content, dtype="<i2").astype(np.float32) / 32768
        assert audio.size > 24000  # OpenAI's pcm: 24 kHz; over a second of speech
        assert word_recall(text, transcriber.transcribe(audio, 24000)) >= 0.6
        # speed goes to the duration model (fewer frames), not to a time-stretch afterwards.
        faster = httpx.post(f"{url}/v1/audio/speech", json={**body, "speed": 1.5}, timeout=120)
        assert faster.status_code == 200
        assert len(faster.content) / len(response.content) == pytest.approx(1 / 1.5, rel=0.08)
        # Text longer than the student's context is split at sentences, not refused.
        long_text = " ".join(f"Sentence {i} makes this input longer than one context." for i in range(36))
        assert len(JoePromptFrontend(read_config(SHIPPED_WEIGHTS)).prepare(long_text, "joe").token_ids) > 4096
        split = httpx.post(f"{url}/v1/audio/speech", json={**body, "input": long_text}, timeout=300)
        assert split.status_code == 200, split.text
        assert len(split.content) / 2 / 24000 > 36 * 2.0  # every sentence was spoken
        # Text with nothing to pronounce is the client's error, in OpenAI's shape.
        silent = httpx.post(f"{url}/v1/audio/speech", json={**body, "input": "..."}, timeout=60)
        assert silent.status_code == 400 and silent.json()["error"]["param"] == "input"
    finally:
        server.terminate()
        server.wait(30)
        log.close()

