"""How a workload reaches a system: one `run` call per request that fills in its trace.

`EngineDriver` talks to the engine through `EngineClient` (core in its own process, as the server
runs it, or in a thread). Servers over HTTP: `benchmarks/http_drivers.py`; baseline drivers:
`benchmarks/baselines.py`.
"""
from __future__ import annotations

import time
from typing import Protocol

from benchmarks.corpus import BenchRequest
from benchmarks.trace import RequestTrace
from engine.client import EngineClient
from engine.config import EngineConfig
from model.sampling import SamplingParams

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
