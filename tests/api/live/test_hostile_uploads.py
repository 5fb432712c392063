"""Hostile voice uploads (issue 51): any multipart body to `POST /v1/audio/voices` (WAV headers
of any channel count, rate, width and length, truncated or spliced files, bytes of any kind,
names and transcripts of any text, fields missing, doubled or unknown) gets a 201 or a 4xx in
OpenAI's error shape, never a 5xx or a connection dropped; /health keeps answering; a normal
speech in a stored voice is served after each. (The app runs in this test's process: an upload
that crashed it would end the test.) The clips of many
channels in many containers one by one, and decoders that crash, stall or overrun, are
tests/api/live/test_clip_decoder.py's and test_voice_upload_isolation.py's.
"""
from __future__ import annotations

import asyncio
import os
import struct

import httpx
import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from api.app import create_app
from api.config.settings import ApiSettings
from benchmarks.hostile import read_speech
from benchmarks.hostile_media import channels_of, encoded, wav_of
from tests.api.conftest import LiveServer, speech_body
from tests.api.live.test_hostile_inputs import HealthRecord, bounded
from tests.api.voice_clips import BASE, GOLDEN, TWO_FRAMES, wav_bytes
from tests.engine.conftest import engine_config

VOICES = "/v1/audio/voices"


@pytest.fixture(scope="module")
def upload_server(chorus_cache, tmp_path_factory):
    config = engine_config(BASE, num_blocks=128)
    config.num_threads = 1
    settings = ApiSettings(voices_dir=str(tmp_path_factory.mktemp("voices")), max_voices_per_owner=1000, **TWO_FRAMES)
    with LiveServer(create_app(config, settings)) as live:
        with np.load(GOLDEN) as golden:
            clip = wav_bytes(np.tile(golden["base_clip"], 2))
        made = httpx.post(live.url + VOICES, data={"name": "normal"}, files={"audio": ("clip.wav", clip)}, timeout=60)
        assert made.status_code == 201, made.text
        yield live


def wav_header(channels: int, rate: int, width: int, frames: int, tag: int = 1) -> bytes:
    """A WAV whose header says what it is given to say, and whose data is as long as it says
    (up to 64 KiB: past that, a truncated file)."""
    declared = channels * frames * width
    fmt = struct.pack("<HHIIHH", tag, channels, rate, (rate * channels * width) & 0xFFFFFFFF,
                      (channels * width) & 0xFFFF, (8 * width) & 0xFFFF)
    return (b"RIFF" + struct.pack("<I", (36 + declared) & 0xFFFFFFFF) + b"WAVEfmt " + struct.pack("<I", len(fmt))
            + fmt + b"data" + struct.pack("<I", declared & 0xFFFFFFFF) + os.urandom(min(declared, 65536)))


def spliced(parts: list[bytes]) -> bytes:
    return b"".join(parts)


REAL = [wav_of(channels_of(8, 1.5, 16000), 16000), wav_of(channels_of(12, 1.5, 16000), 16000),
        encoded("flac", "flac", channels_of(8, 1.5, 24000), 24000), wav_of(channels_of(1, 2.0, 24000), 24000)]
AUDIO = st.one_of(
    st.builds(wav_header, st.integers(0, 65535), st.integers(0, 2**32 - 1), st.sampled_from([0, 1, 2, 3, 4, 8]),
              st.integers(0, 100_000), st.sampled_from([1, 3, 6, 7, 0xFFFE, 0])),
    st.tuples(st.sampled_from(REAL), st.integers(0, 40_000)).map(lambda pair: pair[0][:pair[1]]),  # truncated
    st.lists(st.sampled_from(REAL), min_size=2, max_size=3).map(spliced),
    st.binary(max_size=4096),
    st.sampled_from(REAL),
)
TEXT = st.one_of(st.text(max_size=80), st.sampled_from(["", " ", "x" * 65, "Ann", "Ａｎｎ", "\x00", "a\u202eb"]))
FIELDS = st.fixed_dictionaries({"name": TEXT}, optional={"transcript": st.text(max_size=2500), "language": TEXT,
                                                          "description": st.text(max_size=1100), "type": TEXT,
                                                          "consent": TEXT, "unknown": TEXT})
FILE_FIELD = st.sampled_from(["audio", "audio_sample", "both", "none", "other"])


def assert_voice_served(server) -> None:
    async def run():
        async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
            return await read_speech(client, "/v1/audio/speech", json=speech_body(voice="normal"))

    answer = asyncio.run(run())
    assert answer.status == 200 and answer.audio_bytes, (answer.outcome, answer.body[:300])


def test_any_upload_is_a_voice_or_a_4xx_and_the_server_serves_on(upload_server):
    health = HealthRecord()

    @bounded(max_examples=25)
    @example(REAL[0], {"name": "eight"}, "audio")
    @example(REAL[1], {"name": "twelve"}, "audio_sample")
    @example(wav_header(255, 16000, 2, 1000), {"name": "many"}, "audio")
    @example(b"", {"name": "empty"}, "both")
    @given(AUDIO, FIELDS, FILE_FIELD)
    def case(audio: bytes, fields: dict, file_field: str) -> None:
        files = {"audio": [("audio", ("clip.wav", audio))], "audio_sample": [("audio_sample", ("c.wav", audio))],
                 "both": [("audio", ("a.wav", audio)), ("audio_sample", ("b.wav", audio))], "none": [],
                 "other": [("file", ("c.wav", audio))]}[file_field]
        with health.during(upload_server):
            answer = httpx.post(upload_server.url + VOICES, data=fields, files=files or None, timeout=60)
        assert answer.status_code == 201 or 400 <= answer.status_code < 500, (answer.status_code, answer.text[:300])
        if answer.status_code != 201:
            assert_openai_shape_of(answer)
        else:
            httpx.delete(f"{upload_server.url}{VOICES}/{answer.json()['id']}", timeout=30)
        assert_voice_served(upload_server)

    case()
    health.assert_responsive()


def assert_openai_shape_of(response: httpx.Response) -> None:
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["message"], response.text[:300]
    assert error["type"] == ("rate_limit_error" if response.status_code == 429 else "invalid_request_error")
