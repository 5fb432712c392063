"""First sentence first with the built-in voice, end to end: the speech endpoint speaks every one
of the 30 benchmark sentences (that segments cut by text carry the whole text's phonemes is
tests/api/long/test_first_sentence_first.py's)."""
from __future__ import annotations

import re

import httpx
import numpy as np
import pytest

from tests.voice_packages import require_voice_packages

require_voice_packages()

from api.app import create_app  # noqa: E402
from api.config.settings import ApiSettings  # noqa: E402
from engine.config import EngineConfig  # noqa: E402
from model.config import ModelConfig  # noqa: E402
from model.families.joe.prompt import JoePromptFrontend  # noqa: E402
from model.families.joe.student import SHIPPED_WEIGHTS, read_config  # noqa: E402
from tests.api.conftest import LiveServer  # noqa: E402
from tests.api.long.test_first_sentence_first import SENTENCES, TEXT, planned_texts  # noqa: E402

SAMPLES_PER_FRAME = 256


@pytest.fixture(scope="module")
def frontend() -> JoePromptFrontend:
    return JoePromptFrontend(read_config(SHIPPED_WEIGHTS))


def test_the_speech_endpoint_speaks_all_30_sentences(frontend, chorus_cache):
    texts = planned_texts()
    expected = sum(frontend.prepare(text, "joe").num_frames for text in texts) * SAMPLES_PER_FRAME
    config = EngineConfig(model=ModelConfig(model="joe", device="cpu"), mode="inproc")
    body = {"model": "tts-1", "voice": "alloy", "input": TEXT, "response_format": "pcm",
            "sample_rate": frontend.sample_rate}  # the model's own rate: no resampling
    with LiveServer(create_app(config, ApiSettings())) as live:
        response = httpx.post(f"{live.url}/v1/audio/speech", json=body, timeout=600)
        metrics = httpx.get(f"{live.url}/metrics").text
    assert response.status_code == 200, response.text
    audio = np.frombuffer(response.content, dtype="<i2").astype(np.float32) / 32768
    assert audio.size == expected  # every segment's frames, none twice
    start = 0
    for sentence in SENTENCES:  # and speech where each sentence should be
        end = start + frontend.prepare(sentence, "joe").num_frames * SAMPLES_PER_FRAME
        assert np.sqrt(np.mean(audio[start:end] ** 2)) > 0.01, sentence
        start = end
    assert start == audio.size
    # One preparation per segment, the first one as the first audio's.
    counts = dict(re.findall(r'chorus_prompt_prepare_seconds_count\{kind="(\w+)"\} (\S+)', metrics))
    assert float(counts["first"]) == 1 and float(counts["later"]) == len(texts) - 1
