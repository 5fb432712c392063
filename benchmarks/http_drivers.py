"""Speech servers over HTTP, measured as a user's client sees them: one streamed POST per request.

`HttpDriver` is the client every HTTP system shares (the same lean HTTP/1.1 client,
benchmarks/lean_http.py, the same status handling, the same failure classes); a system differs only in the request body it sends and the
format of the body it gets back (`benchmarks/audio_bodies.py`). Only 127.0.0.1 is ever targeted.
"""
from __future__ import annotations

import asyncio
import json
import time
from typing import Callable

from benchmarks.audio_bodies import BodyAudio, Mp3Body, PcmBody, WavBody
from benchmarks.corpus import BenchRequest
from benchmarks.lean_http import LeanHttpClient
from benchmarks.trace import RequestTrace

# Each response format's reader, given the sample rate asked for.
CHORUS_BODIES: dict[str, Callable[[int], BodyAudio]] = {"pcm": lambda _: PcmBody(), "wav": WavBody,
                                                        "mp3": lambda _: Mp3Body()}
# Connecting to a local server takes milliseconds; a connect this slow means it stopped accepting.
_CONNECT_TIMEOUT_S = 10.0


def _local_only(base_url: str) -> str:
    if not base_url.startswith(("http://127.0.0.1", "http://localhost")):
        raise ValueError(f"the load generator only targets 127.0.0.1, got {base_url}")
    return base_url


class HttpDriver:
    """One HTTP speech endpoint. Invariant: each `run` leaves its trace served (every audio read
    recorded), refused (HTTP 429: `trace.refuse` with the Retry-After header) or failed
    (`trace.fail` with "5xx", "dropped" for a connection that broke or closed early, "timeout",
    or "http <status>" for any other status; the error is raised too)."""

    def __init__(self, name: str, base_url: str, path: str, request_body: Callable[[BenchRequest], dict],
                 body_audio: Callable[[], BodyAudio], sample_rate: int, timeout_s: float = 600.0) -> None:
        self.name = name
        self.base_url = _local_only(base_url)
        self.path = path
        self.request_body = request_body
        self.body_audio = body_audio
        self.sample_rate = sample_rate
        self.timeout_s = timeout_s
        self._http = None

    async def start(self) -> None:
        self._http = LeanHttpClient(self.base_url, _CONNECT_TIMEOUT_S)

    async def run(self, request: BenchRequest, trace: RequestTrace) -> None:
        body = json.dumps(self.request_body(request)).encode()
        try:
            async with asyncio.timeout(self.timeout_s), self._http.request("POST", self.path, body) as response:
                if response.status == 429:
                    trace.refuse(time.monotonic(), response.headers.get("retry-after"))
                    await response.read()  # small: read, so that its connection serves the next request
                    return
                if response.status != 200:
                    trace.fail("5xx" if response.status >= 500 else f"http {response.status}")
                    raise RuntimeError(f"HTTP {response.status}: {(await response.read())[:200]!r}")
                audio = self.body_audio()
                async for data in response.pieces():
                    trace.record(time.monotonic(), audio.samples_in(data))
        except TimeoutError:
            trace.fail("timeout")
            raise
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            trace.fail("dropped")
            raise

    async def close(self) -> None:
        if self._http is not None:
            await self._http.close()


async def connection_floor(base_url: str, path: str, count: int) -> list[float]:
    """Seconds each of `count` GETs of `path` took, all sent at once, each on a connection of its
    own opened for it: what a burst of new clients costs before any speech work (this client and
    the server's HTTP stack on the same machine), the floor under the burst's 429 times."""
    http = LeanHttpClient(_local_only(base_url), _CONNECT_TIMEOUT_S, keep_alive=False)

    async def one() -> float:
        sent = time.monotonic()
        async with asyncio.timeout(60.0), http.request("GET", path) as response:
            await response.read()
            if response.status != 200:
                raise RuntimeError(f"GET {path}: HTTP {response.status}")
        return time.monotonic() - sent

    return list(await asyncio.gather(*(one() for _ in range(count))))


def chorus_driver(base_url: str, model: str = "tiny-random", response_format: str = "pcm",
                  sample_rate: int = 24000) -> HttpDriver:
    """`POST /v1/audio/speech` of a Chorus server, streamed. The server, not this driver, sizes
    each request from its text and picks its sampling, as for any client; `sample_rate` is asked
    for explicitly (24 kHz is also the server's default) so the client knows what it counts."""

    def body(request: BenchRequest) -> dict:
        return {"model": model, "input": request.text, "voice": request.voice,
                "response_format": response_format, "sample_rate": sample_rate}

    return HttpDriver(f"chorus server {response_format}", base_url, "/v1/audio/speech", body,
                      lambda: CHORUS_BODIES[response_format](sample_rate), sample_rate)
