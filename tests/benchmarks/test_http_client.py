"""The serving benchmark's client: body readers per format, how each HTTP answer ends up in a
trace, and the workloads' handling of refusals and bursts."""
from __future__ import annotations

import asyncio
import io
import time
import wave

import numpy as np
import pytest

from benchmarks.audio_bodies import Mp3Body, PcmBody, WavBody
from benchmarks.corpus import BenchRequest
from benchmarks.http_drivers import HttpDriver, connection_floor
from benchmarks.lean_http import LeanHttpClient
from benchmarks.trace import RequestTrace
from benchmarks.workloads import LevelTiming, burst, closed_loop, paced


def read_in_pieces(reader, body: bytes, piece: int) -> list[int]:
    return [reader.samples_in(body[i:i + piece]) for i in range(0, len(body), piece)]


def test_pcm_counts_whole_samples_across_odd_reads():
    assert read_in_pieces(PcmBody(), bytes(10), 3) == [1, 2, 1, 1]


@pytest.mark.parametrize("piece", [1, 7, 44, 45, 4096])
def test_wav_audio_starts_after_the_header_whatever_the_read_sizes(piece):
    with io.BytesIO() as buffer:
        with wave.open(buffer, "wb") as wav:
            wav.setnchannels(1)
            wav.setsampwidth(2)
            wav.setframerate(22050)
            wav.writeframes(bytes(2 * 1000))
        body = buffer.getvalue()
    counts = read_in_pieces(WavBody(22050), body, piece)
    assert sum(counts) == 1000
    first = next(i for i, n in enumerate(counts) if n)
    assert (first + 1) * piece > 44  # no sample is counted before the data chunk's header ends


def test_wav_at_another_rate_or_not_a_wav_is_refused():
    with io.BytesIO() as buffer:
        with wave.open(buffer, "wb") as wav:
            wav.setnchannels(1)
            wav.setsampwidth(2)
            wav.setframerate(24000)
            wav.writeframes(bytes(20))
        body = buffer.getvalue()
    with pytest.raises(ValueError, match="22050"):
        WavBody(22050).samples_in(body)
    with pytest.raises(ValueError, match="RIFF"):
        WavBody(22050).samples_in(b"<html>nope</html>")


@pytest.mark.parametrize("piece", [1, 100, 100_000])
def test_mp3_counts_whole_frames(piece):
    from api.speech.audio.encoders import make_encoder

    encoder = make_encoder("mp3", 24000)
    tone = np.sin(np.arange(24000) * 2 * np.pi * 440 / 24000).astype(np.float32) * 0.3
    body = encoder.encode(tone) + encoder.finish()
    samples = sum(read_in_pieces(Mp3Body(), body, piece))
    # One second in; the encoder adds its delay and pads the last frame, in 576-sample frames.
    assert samples % 576 == 0 and 24000 <= samples <= 24000 + 4 * 576
    with pytest.raises(ValueError, match="MPEG"):
        Mp3Body().samples_in(b"RIFF0000")


def test_responses_framed_by_length_chunks_or_close_are_read_whole():
    async def exchange(reply: bytes) -> tuple[int, bytes]:
        async def handle(reader, writer):
            await reader.readuntil(b"\r\n\r\n")
            writer.write(reply)
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        client = LeanHttpClient(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", 5.0)
        try:
            async with client.request("GET", "/") as response:
                return response.status, await response.read()
        finally:
            await client.close()
            server.close()

    assert asyncio.run(exchange(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")) == (200, b"hello")
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x=1\r\nhello\r\n1\r\n!\r\n0\r\nT: 1\r\n\r\n"
    assert asyncio.run(exchange(chunked)) == (200, b"hello!")
    assert asyncio.run(exchange(b"HTTP/1.0 429 Busy\r\nRetry-After: 2\r\n\r\nto the end")) == (429, b"to the end")
    assert asyncio.run(exchange(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n")) == (204, b"")


def test_a_kept_alive_connection_the_server_closed_is_replaced():
    async def two_requests() -> list[int]:
        served = []

        async def handle(reader, writer):  # one answer per connection, then it closes
            await reader.readuntil(b"\r\n\r\n")
            served.append(1)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        client = LeanHttpClient(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", 5.0)
        statuses = []
        try:
            for _ in range(2):
                async with client.request("GET", "/") as response:
                    await response.read()
                    statuses.append(response.status)
                await asyncio.sleep(0.05)  # the server has closed the idle connection by now
        finally:
            await client.close()
            server.close()
        return statuses + [len(served)]

    assert asyncio.run(two_requests()) == [200, 200, 2]


def test_only_127_0_0_1_is_targeted():
    with pytest.raises(ValueError):
        HttpDriver("x", "http://example.com", "/", dict, PcmBody, 1000)


class CountingDriver:
    """Refuses every request with Retry-After: 1, or serves a 0.1 s chunk after 50 ms."""

    name = "fake"
    sample_rate = 1000

    def __init__(self, refuse: bool) -> None:
        self.refuse = refuse
        self.sent: list[float] = []

    async def run(self, request: BenchRequest, trace: RequestTrace) -> None:
        self.sent.append(trace.sent)
        if self.refuse:
            trace.refuse(trace.sent, "1")
            return
        await asyncio.sleep(0.05)
        trace.record(trace.sent + 0.05, 100)


def test_a_refused_closed_loop_client_waits_retry_after_before_its_next_request():
    driver = CountingDriver(refuse=True)
    result = asyncio.run(closed_loop(driver, iter(lambda: BenchRequest("Hi.", "joe"), None), 2, LevelTiming(0.0, 1.5, 1.0)))
    # Two clients, each refused at 0 s and again after 1 s; the level ends at 1.5 s.
    assert len(result.traces) == 4
    assert all(not t.admitted for t in result.traces)


def test_a_burst_sends_every_request_at_once():
    driver = CountingDriver(refuse=False)
    result = asyncio.run(burst(driver, iter(lambda: BenchRequest("Hi.", "joe"), None), 8, 5.0))
    assert len(result.traces) == 8 and all(t.ok for t in result.traces)
    assert max(driver.sent) - min(driver.sent) < 0.05
    assert result.wall_seconds < 1.0


def test_only_this_machine_is_ever_targeted():
    with pytest.raises(ValueError, match="127.0.0.1"):
        HttpDriver("test", "http://example.com", "/speak", lambda r: {"text": r.text}, PcmBody, 1000)
    with pytest.raises(ValueError, match="127.0.0.1"):
        asyncio.run(connection_floor("http://10.0.0.1:8000", "/health", 2))


class ListenedDriver(CountingDriver):
    """Serves 0.3 s of audio in one chunk, 50 ms after each request."""

    async def run(self, request: BenchRequest, trace: RequestTrace) -> None:
        self.sent.append(trace.sent)
        await asyncio.sleep(0.05)
        trace.record(time.monotonic(), 300)


def test_a_paced_listener_asks_again_once_its_reply_has_played_out():
    driver = ListenedDriver(refuse=False)
    result = asyncio.run(paced(driver, iter(lambda: BenchRequest("Hi.", "joe"), None), 1, LevelTiming(0.0, 1.2, 1.0)))
    # Each reply: first audio 50 ms after it was sent, then 0.3 s of playing: the next request
    # 0.35 s after the last; within 1.2 s that is 4 requests (at 0, 0.35, 0.7, 1.05 s).
    gaps = [b - a for a, b in zip(driver.sent, driver.sent[1:])]
    assert len(result.traces) == 4 and all(t.ok for t in result.traces)
    assert all(0.34 <= gap < 0.45 for gap in gaps)


def test_paced_listeners_all_arrive_in_the_ramp_and_listen_through_the_window():
    driver = ListenedDriver(refuse=False)
    result = asyncio.run(paced(driver, iter(lambda: BenchRequest("Hi.", "joe"), None), 8, LevelTiming(0.25, 0.8, 1.0),
                               seed=3))
    window = result.level.window
    first = sorted(driver.sent)[:8]
    assert max(first) - min(first) > 0.1 and max(first) < window.start  # spread over the ramp, all before the window
    assert all(t.sent < window.end for t in result.traces)  # nothing is sent after the window
    assert all(t.ok and t.ended_at >= t.sent for t in result.traces)  # the last in flight were read to their end
    # Each listener is busy 0.35 s a request: about 0.8 / 0.35 requests each sent in the window.
    assert 8 * 2 <= sum(window.holds(t.sent) for t in result.traces) <= 8 * 3


def test_the_cpu_meter_sees_a_busy_loop():
    from benchmarks.cpu_meter import CpuMeter

    spent = {"cpu": 0.0}
    meter = CpuMeter(lambda: spent["cpu"])
    meter.start()
    ends = time.monotonic() + 0.3
    while time.monotonic() < ends:
        pass
    spent["cpu"] = 0.3  # as the server's processes would report
    figures = meter.stop(audio_seconds=6.0)
    assert 80 < figures["server_cpu_pct"] <= 101
    assert figures["machine_cpu_pct"] >= 50  # this loop alone keeps one core busy
    assert figures["audio_s_per_cpu_s"] == pytest.approx(20.0)
