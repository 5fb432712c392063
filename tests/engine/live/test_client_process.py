"""EngineClient with the core in its own process, and the `chorus say` command (a subprocess)."""
from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import wave
from pathlib import Path

from engine import allocator
from engine.client import EngineClient
from tests.engine.conftest import engine_config
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


def core_process_maps(tiny_model: str) -> str:
    """The libraries a core process has mapped (/proc/<pid>/maps)."""
    async def main():
        async with EngineClient(engine_config(tiny_model, mode="process")) as client:
            assert client.is_ready and client.core_pid is not None
            return Path(f"/proc/{client.core_pid}/maps").read_text()

    return asyncio.run(main())


# A library of the C library's own package that neither Python nor torch loads: preloaded in
# tcmalloc's place, it shows that the preload reaches the core on any glibc system.
STAND_IN = "libBrokenLocale.so.1"


def test_a_cpu_core_process_starts_under_the_allocator_preload(tiny_model, monkeypatch):
    """The core starts with the allocator preloaded, and the server process's own environment
    stays as it was; with the system's tcmalloc, a default core has tcmalloc mapped."""
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    if allocator.find_tcmalloc() is not None:
        assert "tcmalloc" in core_process_maps(tiny_model)
    monkeypatch.setattr(allocator, "find_tcmalloc", lambda: STAND_IN)
    maps = core_process_maps(tiny_model)
    assert "libBrokenLocale" in maps and "tcmalloc" not in maps
    assert "LD_PRELOAD" not in os.environ
