"""Twenty simultaneous streaming clients all complete with correct audio."""
from __future__ import annotations

import asyncio
import re

import httpx
import numpy as np

from tests.api.audio_check import SAMPLES_PER_FRAME, decode, pcm16_to_float
from tests.api.conftest import speech_body

CLIENTS = 20


def completed_count(server, auth) -> float:
    text = httpx.get(f"{server.url}/metrics", headers=auth).text
    return float(re.search(r'^chorus_requests_total\{outcome="completed"\} (\S+)$', text, re.M).group(1))


def test_twenty_simultaneous_streams(server, auth):
    before = completed_count(server, auth)

    async def one(client: httpx.AsyncClient, i: int) -> tuple[int, bytes, int]:
        fmt = "pcm" if i % 2 == 0 else "wav"
        pieces = 0
        data = bytearray()
        body = speech_body(input=f"Client {i} says hi.", seed=100 + i, response_format=fmt)
        async with client.stream("POST", "/v1/audio/speech", json=body) as response:
            assert response.status_code == 200
            async for piece in response.aiter_bytes():
                pieces += 1
                data += piece
        return i, bytes(data), pieces

    async def main():
        limits = httpx.Limits(max_connections=CLIENTS)
        async with httpx.AsyncClient(base_url=server.url, headers=auth, timeout=120, limits=limits) as client:
            return await asyncio.gather(*(one(client, i) for i in range(CLIENTS)))

    results = asyncio.run(main())
    audios = []
    for i, data, pieces in results:
        samples = pcm16_to_float(data) if i % 2 == 0 else decode(data).samples
        # Bound from the API's own budget: (0.5 s + 0.05 s per character) at 82 tokens/s.
        max_frames = int(np.ceil((0.5 + 0.05 * len(f"Client {i} says hi.")) * 82)) // 7
        assert samples.size % SAMPLES_PER_FRAME == 0
        assert 0 < samples.size <= max_frames * SAMPLES_PER_FRAME
        assert np.abs(samples).max() > 0.0
        audios.append(samples[:SAMPLES_PER_FRAME].tobytes())
    assert len(set(audios)) == CLIENTS, "distinct seeds must give distinct audio (no cross-talk)"
    assert completed_count(server, auth) - before == CLIENTS
