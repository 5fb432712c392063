"""The speak socket on a model that reads text while it speaks (Qwen3-TTS): each turn is one
engine request whose prompt holds the first words, fed every later word as it comes; its text
ends at the Flush; what cannot go into it (SSML) follows it; `live_text=false` keeps the
per-sentence behaviour."""
from __future__ import annotations

import json
import time

import pytest
from starlette.testclient import TestClient

from api.app import create_app
from api.config.settings import ApiSettings
from api.deepgram.socket import SpeakSession
from engine.messages import AbortRequest, AddRequest, ExtendText
from tests.api.conftest import prepared_texts
from tests.engine.conftest import engine_config

WORDS = ["Hello ", "there, ", "this ", "is ", "text ", "that ", "comes ", "in ", "while ", "it ", "speaks."]


def serve(**settings) -> TestClient:
    config = engine_config("tiny-random-qwen3", num_blocks=256)
    config.num_threads = 1
    return TestClient(create_app(config, ApiSettings(**({"prompt_cache_mb": 0} | settings))),
                      raise_server_exceptions=False)


@pytest.fixture(scope="module")
def client(chorus_cache):
    with serve() as client:
        yield client


def speak_turn(client, pieces, query="", pause=0.0) -> tuple[bytes, list[dict]]:
    """Sends `pieces` as Speaks (`pause` seconds apart), then a Flush; returns the turn's audio
    and the messages, up to its Flushed."""
    audio, messages = b"", []
    with client.websocket_connect(f"/v1/speak?model=ryan&encoding=linear16{query}") as socket:
        assert json.loads(socket.receive_text())["type"] == "Metadata"
        for piece in pieces:
            socket.send_text(json.dumps({"type": "Speak", "text": piece}))
            time.sleep(pause)
        socket.send_text(json.dumps({"type": "Flush"}))
        while True:
            message = socket.receive()
            if message.get("bytes"):
                audio += message["bytes"]
            elif message.get("text"):
                messages.append(json.loads(message["text"]))
                if messages[-1]["type"] == "Flushed":
                    return audio, messages


def test_a_turn_is_one_request_that_reads_every_word_once(client, posted):
    prepared = prepared_texts(client.app)
    audio, messages = speak_turn(client, WORDS, pause=0.05)
    adds = [c for c in posted if isinstance(c, AddRequest)]
    extends = [c for c in posted if isinstance(c, ExtendText)]
    assert len(adds) == 1 and len(audio) > 0 and [m["type"] for m in messages] == ["Flushed"]
    assert adds[0].prompt.text_complete is False and prepared == ["Hello"]
    assert {e.request_id for e in extends} == {adds[0].request_id}
    assert [e.final for e in extends] == [False] * (len(extends) - 1) + [True]
    # What the request read is the turn's text tokenized as a whole: the first words' ids (in
    # its prompt), then each later piece's.
    frontend = client.app.state.engine.frontend
    whole = "".join(WORDS).strip()
    assert frontend.live_text_ids(prepared[0]) + [i for e in extends for i in e.text_ids] == frontend.live_text_ids(whole)


def test_the_first_request_starts_before_the_first_sentence_ends(client, posted):
    """The request starts with the first whole word: its audio comes before any sentence end."""
    with client.websocket_connect("/v1/speak?model=ryan&encoding=linear16") as socket:
        assert json.loads(socket.receive_text())["type"] == "Metadata"
        socket.send_text(json.dumps({"type": "Speak", "text": "Hello "}))
        assert len(socket.receive_bytes()) > 0  # no Flush, no sentence end: audio all the same
        socket.send_text(json.dumps({"type": "Speak", "text": "there."}))
        socket.send_text(json.dumps({"type": "Flush"}))
        while "Flushed" not in (socket.receive().get("text") or ""):
            pass
    assert sum(isinstance(c, AddRequest) for c in posted) == 1


def test_an_open_word_waits_for_its_end_or_a_moment(client, posted):
    """A piece that ends inside a word ("Hel") is not read until the word is whole: the next
    piece, or OPEN_WORD_SECONDS without one."""
    speak_turn(client, ["Hel", "lo wor", "ld"], pause=0.0)
    adds = [c for c in posted if isinstance(c, AddRequest)]
    extends = [c for c in posted if isinstance(c, ExtendText)]
    frontend = client.app.state.engine.frontend
    assert len(adds) == 1
    later = [i for e in extends for i in e.text_ids]
    assert later == frontend.live_text_ids(" world")


def test_ssml_in_a_live_turn_follows_the_running_request(client, posted):
    """An SSML Speak ends the running request's text; its parts (and the turn's text after it)
    are spoken after it, sentence by sentence."""
    audio, messages = speak_turn(client, ["Hello there ", "<speak>One.<break time=\"200ms\"/>Two.</speak>",
                                          "And three."])
    adds = [c for c in posted if isinstance(c, AddRequest)]
    extends = [c for c in posted if isinstance(c, ExtendText)]
    assert [m["type"] for m in messages] == ["Flushed"] and len(audio) > 0
    assert adds[0].prompt.text_complete is False and all(a.prompt.text_complete for a in adds[1:])
    assert len(adds) >= 3 and extends[-1].final and extends[-1].request_id == adds[0].request_id


def test_live_text_false_keeps_one_request_per_sentence(client, posted):
    speak_turn(client, ["Hello there. ", "How are you? ", "Fine."], query="&live_text=false")
    adds = [c for c in posted if isinstance(c, AddRequest)]
    assert len(adds) == 3 and all(a.prompt.text_complete for a in adds)
    assert not any(isinstance(c, ExtendText) for c in posted)


def test_clear_aborts_the_running_request_and_the_next_speak_starts_a_new_one(client, posted, monkeypatch):
    send_json = SpeakSession.send_json

    async def noting_cleared(self, message):
        if message.get("type") == "Cleared":
            posted.append("Cleared")  # where the answer went out among the engine commands
        await send_json(self, message)

    monkeypatch.setattr(SpeakSession, "send_json", noting_cleared)
    with client.websocket_connect("/v1/speak?model=ryan&encoding=linear16") as socket:
        assert json.loads(socket.receive_text())["type"] == "Metadata"
        socket.send_text(json.dumps({"type": "Speak", "text": "Hello there "}))
        assert len(socket.receive_bytes()) > 0
        socket.send_text(json.dumps({"type": "Clear"}))
        while "Cleared" not in (socket.receive().get("text") or ""):
            pass
        socket.send_text(json.dumps({"type": "Speak", "text": "Again. "}))
        socket.send_text(json.dumps({"type": "Flush"}))
        while "Flushed" not in (socket.receive().get("text") or ""):
            pass
    adds = [c for c in posted if isinstance(c, AddRequest)]
    assert len(adds) == 2 and adds[0].request_id != adds[1].request_id
    assert all(a.prompt.text_complete is False for a in adds)
    # Cleared is an answer a client can act on: the engine was told to stop before it was sent.
    before_cleared = posted[:posted.index("Cleared")]
    assert AbortRequest(adds[0].request_id) in before_cleared


def test_the_normalizer_reads_every_piece_when_asked(client, posted):
    speak_turn(client, ["It costs ", "$3.50 ", "today."], query="&normalize=true")
    extends = [c for c in posted if isinstance(c, ExtendText)]
    frontend = client.app.state.engine.frontend
    assert [i for e in extends for i in e.text_ids] == frontend.live_text_ids(
        " three dollars and fifty cents") + frontend.live_text_ids(" today.")


def test_whitespace_alone_makes_no_turn(client, posted):
    audio, messages = speak_turn(client, ["  ", "\n"])
    assert audio == b"" and messages == [{"type": "Flushed", "sequence_id": 0}]
    assert not any(isinstance(c, AddRequest) for c in posted)


def test_text_beyond_what_one_request_reads_follows_it(client, posted, monkeypatch):
    """A turn longer than one live request has room for: the request's text ends where it is
    full, and the rest, the Flush's open word included, is spoken after it, nothing lost."""
    from api.speech import live_text

    monkeypatch.setattr(live_text, "FRAMES_PER_TEXT_TOKEN", 64)  # room for a few ids only
    prepared = prepared_texts(client.app)
    audio, messages = speak_turn(client, WORDS, pause=0.05)
    adds = [c for c in posted if isinstance(c, AddRequest)]
    extends = [c for c in posted if isinstance(c, ExtendText)]
    assert [m["type"] for m in messages] == ["Flushed"] and len(audio) > 0
    assert adds[0].prompt.text_complete is False and len(adds) > 1 and extends[-1].final
    frontend = client.app.state.engine.frontend
    live = frontend.live_text_ids(prepared[0]) + [i for e in extends for i in e.text_ids]
    after = " ".join(prepared[1:])
    # Every word once: what the live request read, then the segments after it.
    said = frontend.tokenizer.tokenizer.decode(live) + " " + after
    assert said.split() == "".join(WORDS).split()
