"""The clip decoders (api/voices/clip_decoder.py) with real decoder processes: uploads of many
channels in several containers become clips or are refused from their metadata; a decoder that
is killed, stopped, out of memory, out of CPU or answering garbage fails only its own upload,
is counted under its cause, and the next upload gets a fresh process."""
from __future__ import annotations

import asyncio
import io
import os
import signal
import time
from pathlib import Path

import av
import numpy as np
import pytest

from api.app import clip_decoders
from api.config.settings import ApiSettings
from api.http.metrics import CLIP_DECODER_FAILURES, ApiMetrics
from api.voices.clip import ClipRejected
from api.voices.clip_decoder import ClipDecoders
from benchmarks.hostile_media import channels_of, encoded, wav_of
from tests.api.voice_clips import CUSTOM_ORDER_7_1, EIGHT_CHANNEL_FORMATS, MANY_CHANNEL_FORMATS

RATE = 24000
SOURCE_RATE = 48000
SPEECH = dict(min_seconds=1.0, max_seconds=30.0)


def decoders(metrics: ApiMetrics, **settings) -> ClipDecoders:
    """The server's decoders (its defaults, but for `settings`), counting into `metrics`."""
    return clip_decoders(ApiSettings(**settings), metrics)


def failures(metrics: ApiMetrics) -> dict[str, float]:
    return {cause: metrics.registry.get_sample_value("chorus_clip_decoder_failures_total", {"cause": cause})
            for cause in CLIP_DECODER_FAILURES}


def upload(channels: np.ndarray, name: str, formats: dict, rate: int = SOURCE_RATE) -> bytes:
    if name == "wav":
        return wav_of(channels, rate)
    container, codec, options = formats[name]
    return encoded(container, codec, channels, rate, options)


@pytest.fixture(scope="module")
def stereo() -> bytes:
    return wav_of(channels_of(2, 2.0, SOURCE_RATE), SOURCE_RATE)


def test_eight_channels_become_a_clip_and_more_are_refused_from_the_metadata():
    eight = channels_of(8, 2.0, SOURCE_RATE)
    uploads = {f"8 {name}": upload(eight, name, EIGHT_CHANNEL_FORMATS) for name in ("wav", *EIGHT_CHANNEL_FORMATS)}
    uploads["8 wav-extensible"] = wav_of(eight, SOURCE_RATE, extensible=True)
    for count in (12, 255):
        uploads |= {f"{count} {name}": upload(channels_of(count, 0.25, 8000), name, MANY_CHANNEL_FORMATS, 8000)
                    for name in ("wav", "mka-pcm", "caf-pcm", "aiff-pcm")}
    uploads["12 ogg-opus"] = upload(channels_of(12, 0.25, SOURCE_RATE), "ogg-opus", MANY_CHANNEL_FORMATS)
    metrics = ApiMetrics(lambda: None)

    async def run():
        async with decoders(metrics) as pool:
            for name, data in uploads.items():
                started = time.perf_counter()
                if name.startswith("8 "):
                    clip = await pool.prepare(data, RATE, **SPEECH)
                    assert clip.seconds == pytest.approx(2.0, abs=0.02), name
                    assert clip.original_seconds == pytest.approx(2.0, abs=0.01), name
                    level = np.sqrt(np.mean(np.square(eight.mean(axis=0), dtype=np.float64)))
                    assert np.sqrt(np.mean(np.square(clip.samples, dtype=np.float64))) == pytest.approx(level, rel=0.02)
                else:
                    with pytest.raises(ClipRejected) as refused:
                        await pool.prepare(data, RATE, **SPEECH)
                    assert refused.value.reason == "too_many_channels", name
                    assert str(refused.value).startswith(f"the audio has {name.split()[0]} channels"), name
                assert time.perf_counter() - started < 1.0, (name, time.perf_counter() - started)
            assert len(decoder_pids()) == 2  # the spares, started as each upload was taken

    asyncio.run(run())
    assert set(failures(metrics).values()) == {0.0}


@pytest.mark.parametrize("name", CUSTOM_ORDER_7_1)
def test_a_7_1_layout_in_a_custom_order_costs_its_upload_at_most(name, stereo):
    """PyAV 18 frees such a layout twice (tests/api/voice_clips.py): in this process it would
    corrupt the heap; in a decoder it may crash that decoder, and nothing else."""
    data = upload(channels_of(8, 2.0, SOURCE_RATE), name, CUSTOM_ORDER_7_1)
    metrics = ApiMetrics(lambda: None)

    async def run():
        async with decoders(metrics) as pool:
            try:
                assert (await pool.prepare(data, RATE, **SPEECH)).seconds == pytest.approx(2.0, abs=0.02)
            except ClipRejected as refused:
                assert refused.reason == "decoder_failed" and "stopped (killed by SIG" in str(refused)
            assert (await pool.prepare(stereo, RATE, **SPEECH)).seconds == pytest.approx(2.0, abs=0.02)

    asyncio.run(run())


def decoder_pids() -> set[int]:
    """The live decoder processes this process started."""
    pids = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            state, parent = stat.read_text().rsplit(")", 1)[1].split()[:2]
            command = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if int(parent) == os.getpid() and state != "Z" and b"api.voices.clip_worker" in command:
            pids.add(int(stat.parent.name))
    return pids


def spare_pid() -> int:
    """With one decoder at most (clip_decoders=1), the spare the next upload gets."""
    (pid,) = decoder_pids()
    return pid


def test_a_decoder_killed_mid_decode_fails_that_upload_only(stereo):
    metrics = ApiMetrics(lambda: None)

    async def run():
        async with decoders(metrics, clip_decoders=1) as pool:
            await pool.prepare(stereo, RATE, **SPEECH)
            victim = spare_pid()
            os.kill(victim, signal.SIGSTOP)  # it holds the upload, unanswered, until it is killed
            job = asyncio.ensure_future(pool.prepare(stereo, RATE, **SPEECH))
            await asyncio.sleep(0.3)
            os.kill(victim, signal.SIGKILL)
            with pytest.raises(ClipRejected) as refused:
                await job
            assert refused.value.reason == "decoder_failed"
            assert str(refused.value) == ("the audio could not be decoded: the decoder stopped (killed by SIGKILL); "
                                          "the file may be damaged or use an unsupported layout")
            assert spare_pid() != victim
            assert (await pool.prepare(stereo, RATE, **SPEECH)).seconds == pytest.approx(2.0, abs=0.02)

    asyncio.run(run())
    assert failures(metrics) == {**dict.fromkeys(CLIP_DECODER_FAILURES, 0.0), "crashed": 1.0}


def test_a_decoder_that_stops_answering_is_killed_at_its_timeout(stereo):
    metrics = ApiMetrics(lambda: None)

    async def run():
        async with decoders(metrics, clip_decoders=1, clip_decoder_timeout_seconds=1.0) as pool:
            await pool.prepare(stereo, RATE, **SPEECH)
            stopped = spare_pid()
            os.kill(stopped, signal.SIGSTOP)
            started = time.perf_counter()
            with pytest.raises(ClipRejected, match="the decoder took longer than 1 s") as refused:
                await pool.prepare(stereo, RATE, **SPEECH)
            assert refused.value.reason == "decoder_failed" and 1.0 <= time.perf_counter() - started < 2.0
            with pytest.raises(ProcessLookupError):  # killed and reaped
                os.kill(stopped, 0)
            assert (await pool.prepare(stereo, RATE, **SPEECH)).seconds == pytest.approx(2.0, abs=0.02)

    asyncio.run(run())
    assert failures(metrics)["timeout"] == 1.0


def test_a_decoder_out_of_memory_fails_its_upload(stereo):
    """100 MiB is less than the decoder's imports already take: the upload's first sizeable
    allocation fails, as a decoding that outgrew the limit would."""
    metrics = ApiMetrics(lambda: None)

    async def run():
        async with decoders(metrics, clip_decoder_memory_mb=100) as pool:
            for _ in range(2):  # and again in a fresh process
                with pytest.raises(ClipRejected, match="ran out of its 100 MiB of memory") as refused:
                    await pool.prepare(stereo, RATE, **SPEECH)
                assert refused.value.reason == "decoder_failed"

    asyncio.run(run())
    assert failures(metrics)["memory"] == 2.0


def heavy_flac() -> bytes:
    """119 s of 7.1 silence at 768 kHz: within every limit the file itself can break (100 KB,
    under the 120 s cap, 8 channels, the highest rate), and over 2 s of CPU to decode and
    resample on the 2-core machine."""
    rate, layout, block = 768_000, "7.1", 18432
    zeros = np.zeros((1, 8 * block), np.int16)
    buffer = io.BytesIO()
    with av.open(buffer, "w", format="flac") as out:
        stream = out.add_stream("flac", rate=rate, layout=layout, options={"compression_level": "0"})
        for start in range(0, 119 * rate, block):
            frame = av.AudioFrame.from_ndarray(zeros, format="s16", layout=layout)
            frame.sample_rate, frame.pts = rate, start
            out.mux(stream.encode(frame))
        out.mux(stream.encode(None))
    return buffer.getvalue()


def test_a_decoder_out_of_cpu_time_is_ended_by_sigxcpu(stereo):
    """RLIMIT_CPU counts whole seconds: asked for a microsecond, the decoder gets under one
    second beyond what starting took, and the heavy file needs more."""
    data = heavy_flac()
    metrics = ApiMetrics(lambda: None)

    async def run():
        async with decoders(metrics, clip_decoder_cpu_seconds=1e-6, clip_decoder_timeout_seconds=30.0) as pool:
            with pytest.raises(ClipRejected, match="used more than its 1e-06 s of CPU") as refused:
                await pool.prepare(data, RATE, **SPEECH)
            assert refused.value.reason == "decoder_failed"
            assert (await pool.prepare(stereo, RATE, **SPEECH)).seconds == pytest.approx(2.0, abs=0.02)

    asyncio.run(run())
    assert failures(metrics)["cpu"] == 1.0


def answer_pipe(pid: int) -> str:
    """A decoder's end of the pipe its answer goes back on, as /proc names it: its one pipe
    that is neither its stdin nor its stderr (stdout, or once redirected, stdout's duplicate)."""
    fds = Path(f"/proc/{pid}/fd")
    links = {fd.name: os.readlink(fd) for fd in fds.iterdir()}
    return next(str(fds / fd) for fd, link in links.items()
                if link.startswith("pipe:") and link not in (links["0"], links["2"]))


def test_a_decoder_answering_garbage_is_killed(stereo):
    """What comes back is read as the untrusted thing it is: here bytes written into a stopped
    decoder's answer pipe, a header length followed by what is not JSON. (The upload is small
    enough for the pipe to take it whole while the decoder is stopped.)"""
    metrics = ApiMetrics(lambda: None)
    small = wav_of(channels_of(1, 1.5, 8000), 8000)

    async def run():
        async with decoders(metrics, clip_decoders=1) as pool:
            await pool.prepare(stereo, RATE, **SPEECH)
            stopped = spare_pid()
            os.kill(stopped, signal.SIGSTOP)
            with open(answer_pipe(stopped), "wb") as pipe:
                pipe.write(b"\x00\x00\x00\x05hello")
            with pytest.raises(ClipRejected, match="answered garbage") as refused:
                await pool.prepare(small, RATE, **SPEECH)
            assert refused.value.reason == "decoder_failed"
            assert (await pool.prepare(stereo, RATE, **SPEECH)).seconds == pytest.approx(2.0, abs=0.02)

    asyncio.run(run())
    assert failures(metrics)["protocol"] == 1.0


def test_close_kills_every_decoder(stereo):
    async def run():
        pool = decoders(ApiMetrics(lambda: None), clip_decoders=2)
        assert decoder_pids() == set()  # none before the first upload
        await asyncio.gather(*(pool.prepare(stereo, RATE, **SPEECH) for _ in range(2)))
        pids = decoder_pids()
        assert len(pids) == 2  # the two spares
        await pool.close()
        for pid in pids:
            with pytest.raises(ProcessLookupError):
                os.kill(pid, 0)
        with pytest.raises(RuntimeError):
            await pool.prepare(stereo, RATE, **SPEECH)

    asyncio.run(run())
