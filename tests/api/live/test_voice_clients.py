"""The voice library through real clients, unmodified but for the base URL: the official `openai`
package makes a voice from a clip (its `audio.voices.create`, OpenAI's multipart form), speaks in
it and deletes it; Deepgram's SDK speaks in it by name (REST)."""
from __future__ import annotations

import openai
import pytest
from deepgram import DeepgramClient, DeepgramClientOptions, SpeakOptions
from openai import OpenAI

from api.app import create_app
from api.config.settings import ApiSettings
from tests.api.audio_check import decode, pcm16_to_float
from tests.api.conftest import API_KEY, LiveServer
from tests.api.voice_clips import BASE, GOLDEN, wav_bytes
from tests.engine.conftest import engine_config


@pytest.fixture(scope="module")
def server(chorus_cache, tmp_path_factory):
    config = engine_config(BASE, num_blocks=128)
    config.num_threads = 1
    settings = ApiSettings(api_keys=(API_KEY,), voices_dir=str(tmp_path_factory.mktemp("voices")),
                           min_audio_seconds=0.1, audio_seconds_per_char=0.01)
    with LiveServer(create_app(config, settings)) as live:
        yield live


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    import numpy as np

    with np.load(GOLDEN) as golden:
        path = tmp_path_factory.mktemp("clips") / "ann.wav"
        path.write_bytes(wav_bytes(np.tile(golden["base_clip"], 2)))
    return path


def test_the_openai_client_makes_speaks_in_and_deletes_a_voice(server, clip):
    client = OpenAI(base_url=f"{server.url}/v1", api_key=API_KEY)
    with clip.open("rb") as sample:
        voice = client.audio.voices.create(name="Ann", audio_sample=sample, consent="cons_local")
    assert voice.id.startswith("voice_") and (voice.name, voice.object, voice.type) == ("Ann", "audio.voice", "audio_sample")
    for ref in ({"id": voice.id}, voice.id, "Ann"):
        spoken = client.audio.speech.create(model="tts-1", voice=ref, input="Hi there.", response_format="pcm")
        assert pcm16_to_float(spoken.content).size > 0
    wav = client.audio.speech.create(model="tts-1", voice={"id": voice.id}, input="Hi there.", response_format="wav")
    assert decode(wav.content).seconds > 0
    with clip.open("rb") as sample, pytest.raises(openai.ConflictError):
        client.audio.voices.create(name="ann", audio_sample=sample, consent="cons_local")
    deleted = client.audio.voices.delete(voice.id)
    assert (deleted.id, deleted.deleted, deleted.object) == (voice.id, True, "audio.voice.deleted")
    with pytest.raises(openai.NotFoundError) as gone:
        client.audio.speech.create(model="tts-1", voice={"id": voice.id}, input="Hi.")
    assert gone.value.body["param"] == "voice"


def test_the_openai_client_sees_a_bad_clip_as_a_bad_request(server):
    client = OpenAI(base_url=f"{server.url}/v1", api_key=API_KEY)
    with pytest.raises(openai.BadRequestError) as refused:
        client.audio.voices.create(name="Noise", audio_sample=("x.wav", b"not audio at all"), consent="cons_local")
    assert refused.value.body["param"] == "audio"


def test_deepgrams_sdk_speaks_in_a_stored_voice_by_name(server, clip):
    client = OpenAI(base_url=f"{server.url}/v1", api_key=API_KEY)
    with clip.open("rb") as sample:
        client.audio.voices.create(name="Dora", audio_sample=sample, consent="cons_local")
    deepgram = DeepgramClient(API_KEY, DeepgramClientOptions(url=server.url))
    response = deepgram.speak.rest.v("1").stream_memory(
        {"text": "Hi there."}, SpeakOptions(model="Dora", encoding="linear16", container="wav", sample_rate=8000))
    assert decode(response.stream_memory.getvalue()).seconds > 0
