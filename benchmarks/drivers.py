"""How a workload reaches a system: one `run` call per request that fills in its trace.

`EngineDriver` talks to the engine through `EngineClient` (core in its own process, as the server
runs it, or in a thread); `HttpDriver` streams `POST /v1/audio/speech` from a running server on
127.0.0.1. Baseline drivers live in `benchmarks/baselines.py`.
"""
from __future__ import annotations

import time
from typing import Protocol

from benchmarks.corpus import BenchRequest
from benchmarks.trace import RequestTrace
from engine.client import EngineClient
from engine.config import EngineConfig
from model.sampling import SamplingParams

PCM16_BYTES = 2


class Driver(Protocol):
    name: str
    sample_rate: int

    async def start(self) -> None: ...

    async def run(self, request: BenchRequest, trace: RequestTrace) -> None:
        """Records every audio chunk of `request` into `trace`; raises when the request fails."""

    async def close(self) -> None: ...


def exact_length(request: BenchRequest) -> SamplingParams:
    """Greedy, and exactly `max_tokens` tokens: every system does the same work per request."""
    return SamplingParams(temperature=0.0, max_tokens=request.max_tokens, min_tokens=request.max_tokens)


class EngineDriver:
    """The engine behind its asyncio client; a chunk's arrival is when the client yields it."""

    def __init__(self, config: EngineConfig, name: str = "chorus engine") -> None:
        self.name = name
        self.config = config
        self.client = EngineClient(config)
        self.sample_rate = self.client.sample_rate

    async def start(self) -> None:
        await self.client.start()

    async def run(self, request: BenchRequest, trace: RequestTrace) -> None:
        async for chunk in self.client.synthesize(request.text, request.voice, exact_length(request)):
            trace.record(time.monotonic(), len(chunk.pcm))
            if chunk.finished and chunk.finish_reason not in ("stop", "length"):
                raise RuntimeError(f"request ended with {chunk.finish_reason}: {chunk.error}")

    async def close(self) -> None:
        await self.client.close()

    @property
    def core_pid(self) -> int | None:
        return self.client.core_pid


class HttpDriver:
    """A running Chorus server. The server, not this driver, decides each request's length (from
    the text, as for any client) and its sampling; audio is requested as raw 16-bit PCM so a
    chunk's sample count is its byte count over two."""

    def __init__(self, base_url: str, model: str = "tiny-random", sample_rate: int = 24000) -> None:
        if not base_url.startswith(("http://127.0.0.1", "http://localhost")):
            raise ValueError(f"the load generator only targets 127.0.0.1, got {base_url}")
        self.name = f"chorus server ({base_url})"
        self.base_url = base_url
        self.model = model
        self.sample_rate = sample_rate
        self._http = None

    async def start(self) -> None:
        import httpx

        self._http = httpx.AsyncClient(base_url=self.base_url, timeout=httpx.Timeout(600.0, connect=10.0),
                                       limits=httpx.Limits(max_connections=None, max_keepalive_connections=None))

    async def run(self, request: BenchRequest, trace: RequestTrace) -> None:
        body = {"model": self.model, "input": request.text, "voice": request.voice,
                "response_format": "pcm", "sample_rate": self.sample_rate}
        async with self._http.stream("POST", "/v1/audio/speech", json=body) as response:
            if response.status_code != 200:
                raise RuntimeError(f"HTTP {response.status_code}: {(await response.aread())[:200]!r}")
            carry = 0
            async for data in response.aiter_raw():
                # NOTE: a network read may split a sample; count whole samples only.
                whole, carry = divmod(carry + len(data), PCM16_BYTES)
                trace.record(time.monotonic(), whole)

    async def close(self) -> None:
        if self._http is not None:
            await self._http.aclose()
