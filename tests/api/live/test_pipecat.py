"""Pipecat's own TTS services (pipecat-ai, unmodified but for the base URL) against a live Chorus:
its Deepgram WebSocket service and its OpenAI service each turn text into audio frames in a
minimal pipeline (Pipecat's own test harness, `pipecat.tests.utils.run_test`)."""
from __future__ import annotations

import asyncio

from pipecat.frames.frames import ErrorFrame, TTSAudioRawFrame, TTSSpeakFrame
from pipecat.services.deepgram.tts import DeepgramTTSService
from pipecat.services.openai.tts import OpenAITTSService
from pipecat.tests.utils import SleepFrame, run_test

from tests.api.conftest import API_KEY

TEXT = "Hello there. How are you today?"
RATE = 24000


def spoken(frames) -> tuple[int, list]:
    """Audio bytes in the TTS audio frames, and the error frames, among a pipeline's frames."""
    audio = [frame for frame in frames if isinstance(frame, TTSAudioRawFrame)]
    assert all(frame.sample_rate == RATE and frame.num_channels == 1 for frame in audio)
    return sum(len(frame.audio) for frame in audio), [frame for frame in frames if isinstance(frame, ErrorFrame)]


def run(service) -> tuple[int, list]:
    # The sleep lets the speech finish before the harness ends the pipeline.
    down, up = asyncio.run(run_test(service, frames_to_send=[TTSSpeakFrame(TEXT), SleepFrame(sleep=4.0)],
                                    pipeline_params=None, start_timeout=10.0))
    return spoken([*down, *up])


def test_pipecat_deepgram_websocket_service_speaks(server):
    service = DeepgramTTSService(api_key=API_KEY, base_url=server.url.replace("http", "ws"), sample_rate=RATE,
                                 encoding="linear16", settings=DeepgramTTSService.Settings(voice="aura-2-thalia-en"))
    audio_bytes, errors = run(service)
    assert not errors and audio_bytes > 0.3 * RATE * 2


def test_pipecat_openai_service_speaks(server):
    service = OpenAITTSService(api_key=API_KEY, base_url=f"{server.url}/v1", sample_rate=RATE,
                               settings=OpenAITTSService.Settings(voice="alloy"))
    audio_bytes, errors = run(service)
    assert not errors and audio_bytes > 0.3 * RATE * 2
