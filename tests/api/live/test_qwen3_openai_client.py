"""The official `openai` package against a live server of a Qwen3-TTS checkpoint (the tiny random
one, 8 kHz): a speaker with instructions, the `language` extension through `extra_body`, every
format, and its refusals as the client raises them."""
from __future__ import annotations

import openai
import pytest
from openai import OpenAI

from api.app import create_app
from api.config.settings import ApiSettings
from tests.api.audio_check import decode, pcm16_to_float
from tests.api.conftest import API_KEY, LiveServer
from tests.api.qwen3_checkpoints import qwen3_checkpoint
from tests.engine.conftest import engine_config

FORMATS = ("pcm", "wav", "mp3", "opus", "aac", "flac")


@pytest.fixture(scope="module")
def qwen3_server(chorus_cache):
    config = engine_config(str(qwen3_checkpoint(chorus_cache)), num_blocks=128)
    config.num_threads = 1
    settings = ApiSettings(api_keys=(API_KEY,), min_audio_seconds=0.1, audio_seconds_per_char=0.01)
    with LiveServer(create_app(config, settings)) as live:
        yield live


@pytest.fixture(scope="module")
def client(qwen3_server) -> OpenAI:
    return OpenAI(base_url=f"{qwen3_server.url}/v1", api_key=API_KEY)


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_speaker_speaks_every_format(client, fmt):
    response = client.audio.speech.create(model="tts-1", voice="ryan", input="Hi there.", response_format=fmt,
                                          instructions="Cheerful and quick.", extra_body={"language": "english"})
    if fmt == "pcm":
        assert pcm16_to_float(response.content).size > 0
    else:
        assert decode(response.content).seconds > 0


def test_the_models_own_rate_through_the_sample_rate_extension(client):
    response = client.audio.speech.create(model="tts-1", voice="vivian", input="Hi.", response_format="pcm",
                                          extra_body={"sample_rate": 8000, "language": "Chinese"})
    assert pcm16_to_float(response.content).size % 640 == 0  # whole 12.5 Hz frames of 640 samples


def test_an_unknown_language_is_a_bad_request_naming_it(client):
    with pytest.raises(openai.BadRequestError) as refused:
        client.audio.speech.create(model="tts-1", voice="ryan", input="Hi.", extra_body={"language": "klingon"})
    assert refused.value.body["param"] == "language"
