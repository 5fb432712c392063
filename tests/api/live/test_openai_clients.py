"""The official `openai` package (sync and async) against a live server, every format."""
from __future__ import annotations

import asyncio
import time

import httpx
import numpy as np
import pytest
from openai import AsyncOpenAI, OpenAI

from tests.api.audio_check import SAMPLES_PER_FRAME, decode, pcm16_to_float
from tests.api.conftest import API_KEY, speech_body

FORMATS = ("pcm", "wav", "mp3", "opus", "aac", "flac")
# Encoders pad: LAME's delay and last granule, AAC's priming frame; a few tens of ms.
CODEC_PADDING_SECONDS = 0.12
TEXT = "Hello there."
SEED = 7


def decoded_seconds(fmt: str, data: bytes) -> tuple[int, int, float]:
    if fmt == "pcm":
        return 24000, 1, pcm16_to_float(data).size / 24000
    audio = decode(data)
    return audio.sample_rate, audio.channels, audio.seconds


@pytest.fixture(scope="module")
def reference(server, auth) -> bytes:
    """The engine's audio for TEXT/SEED as raw pcm: what every format must match in length."""
    response = httpx.post(f"{server.url}/v1/audio/speech", json=speech_body(input=TEXT, seed=SEED), headers=auth, timeout=60)
    assert response.status_code == 200
    return response.content


def test_reference_is_whole_frames_of_the_engine(reference):
    samples = pcm16_to_float(reference)
    assert samples.size > 0 and samples.size % SAMPLES_PER_FRAME == 0
    assert 0 < abs(samples).max() <= 1.0


@pytest.mark.parametrize("fmt", FORMATS)
def test_sync_client_streams_every_format(server, reference, fmt):
    client = OpenAI(base_url=f"{server.url}/v1", api_key=API_KEY)
    data = bytearray()
    first_at = None
    with client.audio.speech.with_streaming_response.create(
        model="tts-1", voice="alloy", input=TEXT, response_format=fmt, extra_body={"seed": SEED}
    ) as response:
        assert response.status_code == 200
        for piece in response.iter_bytes():
            if first_at is None and piece:
                first_at, first_size = time.monotonic(), len(piece)
            data += piece
    done_at = time.monotonic()
    expected = pcm16_to_float(reference).size / 24000
    rate, channels, seconds = decoded_seconds(fmt, bytes(data))
    assert rate == (48000 if fmt == "opus" else 24000)  # Opus always decodes at 48 kHz
    assert channels == 1
    assert expected <= seconds + 1e-6 <= expected + CODEC_PADDING_SECONDS
    # Streaming, not buffering: the first bytes came well before the last, and were a part.
    assert first_size < len(data)
    assert done_at - first_at > 0.1


def test_async_client_streams_every_format_concurrently(server, reference):
    async def fetch(client: AsyncOpenAI, fmt: str) -> tuple[str, bytes, float, float]:
        data = bytearray()
        first_at = None
        async with client.audio.speech.with_streaming_response.create(
            model="gpt-4o-mini-tts", voice={"id": "tara"}, input=TEXT, response_format=fmt,
            extra_body={"seed": SEED},
        ) as response:
            async for piece in response.iter_bytes():
                first_at = first_at or time.monotonic()
                data += piece
        return fmt, bytes(data), first_at, time.monotonic()

    async def main():
        async with AsyncOpenAI(base_url=f"{server.url}/v1", api_key=API_KEY) as client:
            return await asyncio.gather(*(fetch(client, fmt) for fmt in FORMATS))

    expected = pcm16_to_float(reference).size / 24000
    for fmt, data, first_at, done_at in asyncio.run(main()):
        rate, channels, seconds = decoded_seconds(fmt, data)
        assert (rate, channels) == ((48000 if fmt == "opus" else 24000), 1), fmt
        assert expected <= seconds + 1e-6 <= expected + CODEC_PADDING_SECONDS, fmt
        assert done_at - first_at > 0.1, fmt


def test_same_seed_gives_the_same_pcm(server, auth, reference):
    again = httpx.post(f"{server.url}/v1/audio/speech", json=speech_body(input=TEXT, seed=SEED), headers=auth, timeout=60)
    assert again.content == reference


def test_speed_shortens_audio_without_resampling(server, auth, reference):
    fast = httpx.post(f"{server.url}/v1/audio/speech", json=speech_body(input=TEXT, seed=SEED, speed=2.0), headers=auth, timeout=60)
    assert fast.status_code == 200
    ratio = pcm16_to_float(fast.content).size / pcm16_to_float(reference).size
    assert ratio == pytest.approx(0.5, abs=0.03)


@pytest.mark.parametrize("fmt, rate", [("pcm", 16000), ("mp3", 44100), ("flac", 8000), ("wav", 48000)])
def test_sample_rate_extension(server, auth, reference, fmt, rate):
    response = httpx.post(
        f"{server.url}/v1/audio/speech", json=speech_body(input=TEXT, seed=SEED, response_format=fmt, sample_rate=rate),
        headers=auth, timeout=60,
    )
    assert response.status_code == 200
    expected = pcm16_to_float(reference).size / 24000
    if fmt == "pcm":
        seconds = pcm16_to_float(response.content).size / rate
    else:
        audio = decode(response.content)
        assert audio.sample_rate == rate
        seconds = audio.seconds
    assert seconds == pytest.approx(expected, abs=CODEC_PADDING_SECONDS)


@pytest.mark.parametrize("fmt, media_type", [("mulaw", "audio/PCMU"), ("alaw", "audio/PCMA")])
@pytest.mark.parametrize("rate", [None, 16000])
def test_telephony_formats_are_g711_of_the_same_audio(server, auth, reference, fmt, media_type, rate):
    from api.speech.audio.resample import StreamingResampler

    body = speech_body(input=TEXT, seed=SEED, response_format=fmt) | ({"sample_rate": rate} if rate else {})
    response = httpx.post(f"{server.url}/v1/audio/speech", json=body, headers=auth, timeout=60)
    assert response.status_code == 200 and response.headers["content-type"] == media_type
    rate = rate or 8000  # G.711's own rate unless asked otherwise
    audio = decode(response.content, fmt, rate)
    resampler = StreamingResampler(24000, rate)
    expected = np.concatenate([resampler.process(pcm16_to_float(reference)), resampler.flush()])
    assert audio.samples.size == expected.size
    noise = np.mean((audio.samples - expected) ** 2)
    assert 10 * np.log10(np.mean(expected ** 2) / noise) > 25  # G.711's quantization, nothing else


def test_models_and_voices(server):
    client = OpenAI(base_url=f"{server.url}/v1", api_key=API_KEY)
    ids = {model.id for model in client.models.list()}
    assert {"tts-1", "tts-1-hd", "gpt-4o-mini-tts", server.engine.frontend.model_name} <= ids
    voices = httpx.get(f"{server.url}/v1/audio/voices", headers={"Authorization": f"Bearer {API_KEY}"}).json()
    entry = voices["data"][0]
    assert entry["voices"] == list(server.engine.frontend.voices)
    assert set(entry["aliases"]) >= {"alloy", "echo", "nova", "shimmer"}
    assert set(entry["aliases"].values()) <= set(entry["voices"])


def test_open_webui_reads_the_voices_and_models_without_a_key(server):
    """Open WebUI's OpenAI TTS settings fetch `{base}/audio/voices` and `{base}/audio/models` with no
    Authorization header and read them as below (backend/open_webui/routers/audio.py)."""
    base = f"{server.url}/v1"
    data = httpx.get(f"{base}/audio/voices").json()
    available_voices = {voice["id"]: voice["name"] for voice in data.get("voices", [])}
    assert set(server.engine.frontend.voices) | {"alloy", "nova"} <= set(available_voices)
    models = httpx.get(f"{base}/audio/models").json().get("models", [])
    assert {"tts-1", server.engine.frontend.model_name} <= {model["id"] for model in models}
    assert httpx.get(f"{base}/models").status_code == 401  # everything else still needs the key
