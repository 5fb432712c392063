"""The serving benchmark's HTTP driver against a real uvicorn server: how each HTTP answer
(served, refused, failed, cut off) ends up in a trace, over kept-alive connections and chunked
bodies read as they arrive."""
from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager

import pytest
import uvicorn

from benchmarks.audio_bodies import PcmBody
from benchmarks.corpus import BenchRequest
from benchmarks.http_drivers import HttpDriver
from benchmarks.trace import RequestTrace


def answering(status: int, body: bytes, headers: list[tuple[bytes, bytes]] = ()):
    async def app(scope, receive, send):
        await receive()
        await send({"type": "http.response.start", "status": status, "headers": list(headers)})
        await send({"type": "http.response.body", "body": body})
    return app


@asynccontextmanager
async def serving(app):
    """`app` on a uvicorn server of this event loop, at a port the OS picked: its base URL."""
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off"))
    task = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    finally:
        server.should_exit = True
        await task


async def run_against(app, requests: int = 1) -> tuple[RequestTrace, BaseException | None]:
    """The driver's last trace of `requests` sent one after another (on its kept-alive connection)."""
    async with serving(app) as url:
        driver = HttpDriver("test", url, "/speak", lambda r: {"text": r.text}, PcmBody, 1000)
        await driver.start()
        try:
            for _ in range(requests):
                trace = RequestTrace(0.0, 1000)
                await driver.run(BenchRequest("Hello.", "joe"), trace)
            return trace, None
        except Exception as exc:  # noqa: BLE001 - the test looks at what was raised
            return trace, exc
        finally:
            await driver.close()


def test_http_answers_become_served_refused_or_failed_traces():
    ok, error = asyncio.run(run_against(answering(200, bytes(200))))
    assert error is None and ok.ok and ok.audio_seconds == pytest.approx(0.1)
    busy, error = asyncio.run(run_against(answering(429, b"{}", [(b"retry-after", b"2")])))
    assert error is None and not busy.ok and not busy.admitted and busy.retry_after == "2"
    assert busy.time_to_refusal is not None and busy.time_to_refusal > 0
    broken, error = asyncio.run(run_against(answering(503, b"down")))
    assert isinstance(error, RuntimeError) and broken.error == "5xx" and broken.admitted
    bad, error = asyncio.run(run_against(answering(404, b"no")))
    assert bad.error == "http 404"


def streaming(pieces: list[bytes], delay_s: float = 0.0):
    """Answers 200 with `pieces` as separate body messages (chunked on the wire), `delay_s` apart."""
    async def app(scope, receive, send):
        await receive()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        for piece in pieces:
            await asyncio.sleep(delay_s)
            await send({"type": "http.response.body", "body": piece, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
    return app


def test_a_chunked_body_is_read_piece_by_piece_as_it_arrives():
    trace, error = asyncio.run(run_against(streaming([bytes(100), bytes(60), bytes(40)], delay_s=0.05), requests=2))
    assert error is None and trace.ok and trace.audio_seconds == pytest.approx(0.1)
    assert len(trace.chunks) == 3 and trace.chunks[-1][0] - trace.chunks[0][0] >= 0.08


def test_a_connection_that_breaks_mid_body_is_a_dropped_trace():
    async def app(scope, receive, send):
        await receive()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"1000")]})
        await send({"type": "http.response.body", "body": bytes(10), "more_body": True})
        raise RuntimeError("the server gives up mid-body")

    trace, error = asyncio.run(run_against(app))
    assert error is not None and trace.error == "dropped"


