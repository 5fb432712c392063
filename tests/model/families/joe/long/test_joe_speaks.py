"""The shipped voice, end to end: it speaks recognisable English through the engine and ends by
itself on every eval sentence with the teacher's duration (`speed` through its duration model:
tests/model/families/joe/test_joe_speaks.py; `chorus serve` with no flags: live/test_joe_speaks.py)."""
from __future__ import annotations

import asyncio

import numpy as np
import pytest

from tests.voice_packages import require_voice_packages

require_voice_packages()
pytest.importorskip("pocketsphinx")

from benchmarks.asr import Transcriber, normalize_words
from capacity.config import CapacityConfig
from engine.client import EngineClient
from engine.config import EngineConfig
from evaluation import eval_sentences
from model.config import ModelConfig
from model.families.joe.prompt import JoePromptFrontend
from model.families.joe.student import SHIPPED_WEIGHTS, read_config
from tests.model.families.joe.test_joe_speaks import SPOKEN, word_recall


@pytest.fixture(scope="module")
def transcriber() -> Transcriber:
    return Transcriber()


async def synthesize_all(texts: list[str], speed: float = 1.0) -> list[tuple[np.ndarray, str]]:
    # Every text at once, all admitted: these tests are about what the voice says, not about load.
    config = EngineConfig(model=ModelConfig(model="joe", device="cpu"), mode="inproc",
                          capacity=CapacityConfig(max_queue_delay=None))
    async with EngineClient(config) as client:
        async def one(text: str) -> tuple[np.ndarray, str]:
            pieces, reason = [], None
            async for chunk in client.synthesize(text, "joe", speed=speed):
                pieces.append(chunk.pcm)
                reason = chunk.finish_reason
            return np.concatenate(pieces), reason

        return list(await asyncio.gather(*(one(t) for t in texts)))


def test_speaks_sentences_that_asr_understands(transcriber):
    results = asyncio.run(synthesize_all(list(SPOKEN)))
    assert [reason for _, reason in results] == ["stop"] * len(SPOKEN)
    transcripts = [transcriber.transcribe(audio, 22050) for audio, _ in results]
    heard = sum(word_recall(s, t) * len(normalize_words(s)) for s, t in zip(SPOKEN, transcripts))
    # A broken voice is heard at about 0. Measured on these four (one at a time): the float
    # decoder 0.71, the int8 one served by default 0.60 (over 78 sentences the int8 decoder's WER
    # is 19.4 % against the float one's 21.4 %: these four are where it does worst).
    assert heard / sum(len(normalize_words(s)) for s in SPOKEN) >= 0.5, transcripts


def test_ends_on_every_eval_sentence_with_the_teachers_length():
    sentences = eval_sentences()
    frontend = JoePromptFrontend(read_config(SHIPPED_WEIGHTS))
    results = asyncio.run(synthesize_all(sentences))
    for text, (audio, reason) in zip(sentences, results):
        assert reason == "stop", text
        # The teacher's duration model fixes the frame count; every frame arrives, none twice.
        assert audio.size == frontend.prepare(text, "joe").num_frames * 256, text
        assert np.sqrt(np.mean(audio ** 2)) > 0.01, text  # speech, not silence
