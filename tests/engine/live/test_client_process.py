"""EngineClient with the core in its own process, and the `chorus say` command (a subprocess)."""
from __future__ import annotations

import os
import subprocess
import sys
import wave

from tests.engine.test_client import check_concurrent_requests_stream_in_order_and_finish_once


def test_concurrent_requests_stream_in_order_and_finish_once_from_a_core_process(tiny_model):
    check_concurrent_requests_stream_in_order_and_finish_once(tiny_model, "process")


def test_chorus_say_writes_a_wav(tiny_model, tmp_path, chorus_cache):
    out = tmp_path / "out.wav"
    proc = subprocess.run(
        [sys.executable, "-m", "api.cli", "say", "Hello there.", "-o", str(out), "--model", tiny_model,
         "--max-tokens", "70", "--seed", "3", "--device", "cpu"],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "CHORUS_CACHE": str(chorus_cache)},
    )
    assert proc.returncode == 0, proc.stderr
    with wave.open(str(out)) as wav:
        assert wav.getframerate() == 24000 and wav.getnchannels() == 1 and wav.getsampwidth() == 2
        assert wav.getnframes() == 10 * 2048
