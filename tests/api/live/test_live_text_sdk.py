"""Text that streams in, through Deepgram's SDK (unmodified but for the base URL) against a
Qwen3-TTS server: a reply sent word by word is one engine request per turn, its audio begins
before the first sentence is complete, a Clear aborts it and the next turn is a new request."""
from __future__ import annotations

import threading
import time

import pytest
from deepgram import DeepgramClient, DeepgramClientOptions, SpeakWebSocketEvents, SpeakWSOptions

from api.app import create_app
from api.config.settings import ApiSettings
from engine.messages import AbortRequest, AddRequest, ExtendText
from tests.api.conftest import API_KEY, LiveServer
from tests.engine.conftest import engine_config

REPLY = "Thanks for calling. I can help with that order right now."


@pytest.fixture(scope="module")
def server(chorus_cache):
    config = engine_config("tiny-random-qwen3", num_blocks=256)
    config.num_threads = 1
    with LiveServer(create_app(config, ApiSettings(api_keys=(API_KEY,)))) as live:
        yield live


def test_the_sdk_streams_a_reply_into_one_request_per_turn(server, posted):
    audio_at: list[float] = []
    flushed, cleared = threading.Event(), threading.Event()
    connection = DeepgramClient(API_KEY, DeepgramClientOptions(url=server.url)).speak.websocket.v("1")
    connection.on(SpeakWebSocketEvents.AudioData, lambda _, data, **kw: audio_at.append(time.monotonic()))
    connection.on(SpeakWebSocketEvents.Flushed, lambda _, **kw: flushed.set())
    connection.on(SpeakWebSocketEvents.Cleared, lambda _, **kw: cleared.set())
    assert connection.start(SpeakWSOptions(model="ryan", encoding="linear16", sample_rate=24000))
    words = [word + " " for word in REPLY.split()]
    second_word_at = None
    for word in words:  # three words a second
        connection.send_text(word)
        second_word_at = second_word_at or (time.monotonic() if word != words[0] else None)
        time.sleep(0.33)
    connection.flush()
    assert flushed.wait(60)
    adds = [c for c in posted if isinstance(c, AddRequest)]
    assert len(adds) == 1 and adds[0].prompt.text_complete is False
    assert [c.final for c in posted if isinstance(c, ExtendText)][-1] is True
    # The request started with the first word, and spoke before the turn's text was all in.
    assert posted.at[id(adds[0])] < second_word_at and audio_at and audio_at[0] < second_word_at + 1.0
    # Barge-in: the running request is aborted; the next turn is a request of its own.
    connection.send_text("This reply is cut off by the caller ")
    time.sleep(0.3)
    connection.clear()
    assert cleared.wait(30)
    adds = [c for c in posted if isinstance(c, AddRequest)]
    assert len(adds) == 2 and any(isinstance(c, AbortRequest) and c.request_id == adds[1].request_id for c in posted)
    flushed.clear()
    connection.send_text("Sorry, go ahead.")
    connection.flush()
    assert flushed.wait(60)
    assert sum(isinstance(c, AddRequest) for c in posted) == 3
    connection.finish()
