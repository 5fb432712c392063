"""The spoken budget: what one speech (or speak-socket turn) may say, counted after SSML,
pronunciations and normalization, refused with a 400 naming it before anything is prepared, on
every route and on the socket."""
from __future__ import annotations

import json

import pytest
from starlette.testclient import TestClient

import api.speech.spoken_budget as spoken_budget
from api.app import create_app
from api.config.settings import ApiSettings
from api.speech.spoken_budget import SECONDS_PER_CHAR, SECONDS_PER_IDEOGRAPH, Spoken, SpeechTooLong, SpokenBudget
from model.text.ssml import SpeechPart
from tests.api.conftest import prepared_texts
from tests.engine.conftest import engine_config

# The expansion: "a " 2,000 times with "a" said as a 299-character phrase.
LONG_SAY_AS = ("and so on " * 30)[:299]  # words: no run too long to cut
EXPANDING = {"input": "a " * 2000, "pronunciations": [{"word": "a", "say_as": LONG_SAY_AS}]}


def test_what_a_text_says_is_counted_after_normalization():
    spoken = SpokenBudget(8192, 900).check([SpeechPart("Pay $3.50 now.")])
    assert spoken.chars == len("Pay three dollars and fifty cents now.")
    assert spoken.seconds == pytest.approx(spoken.chars * SECONDS_PER_CHAR)


def test_digits_read_out_go_over_the_characters_though_the_input_is_within_its_limit():
    text = "1234567890123 " * 292  # 4,088 characters, read out: ~39,000
    with pytest.raises(SpeechTooLong, match=r"says 38,\d{3} characters .* at most 8,192 characters"):
        SpokenBudget(8192, 900).check([SpeechPart(text)])


def test_text_longer_than_the_budget_as_written_is_refused_without_being_read(monkeypatch):
    def never(text):
        raise AssertionError("normalized a text already over the budget")

    monkeypatch.setattr(spoken_budget, "normalize", never)
    with pytest.raises(SpeechTooLong, match="at least 9,000 characters"):
        SpokenBudget(8192, 900).check([SpeechPart("a" * 5000), SpeechPart("b" * 4000)])


def test_seconds_count_speed_rate_pauses_and_ideographs():
    budget = SpokenBudget(100_000, 10_000)
    assert budget.check([SpeechPart("abcd", rate=0.5)], speed=0.5).seconds == pytest.approx(4 * SECONDS_PER_CHAR / 0.25)
    assert budget.check([SpeechPart("ab", pause_after=3.0)]).seconds == pytest.approx(2 * SECONDS_PER_CHAR + 3.0)
    assert budget.check([SpeechPart("你好ab")]).seconds == pytest.approx(2 * SECONDS_PER_IDEOGRAPH + 2 * SECONDS_PER_CHAR)


def test_a_slow_speed_goes_over_the_seconds():
    prose = "This is an ordinary sentence of prose. " * 100  # 3,900 characters: ~273 s at speed 1
    SpokenBudget(8192, 900).check([SpeechPart(prose)], speed=1.0)
    with pytest.raises(SpeechTooLong, match="about 1,092 seconds of speech .* 900 seconds"):
        SpokenBudget(8192, 900).check([SpeechPart(prose)], speed=0.25)


def test_a_turn_counts_what_came_before_it():
    budget = SpokenBudget(10, 900)
    first = budget.check_texts(["abcdef"])
    assert first == Spoken(6, pytest.approx(6 * SECONDS_PER_CHAR))
    with pytest.raises(SpeechTooLong):
        budget.check_texts(["ghijk"], before=first)


# --- on the routes (in process, the Qwen3-TTS test model: it reads live text on the socket) -------

@pytest.fixture(scope="module")
def client(chorus_cache):
    config = engine_config("tiny-random-qwen3", num_blocks=256)
    config.num_threads = 1
    settings = ApiSettings(prompt_cache_mb=0, max_spoken_chars=200)
    with TestClient(create_app(config, settings), raise_server_exceptions=False) as client:
        yield client


def speech(**fields) -> dict:
    return {"model": "tts-1", "voice": "alloy", "response_format": "pcm", **fields}


def test_an_expanding_pronunciation_is_a_400_before_anything_is_prepared(client):
    prepared = prepared_texts(client.app)
    response = client.post("/v1/audio/speech", json=speech(**EXPANDING))
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert (error["code"], error["param"]) == ("speech_too_long", "input")
    assert "at least 600,000 characters" in error["message"] and "--max-spoken-chars" in error["message"]
    assert prepared == []
    # Digits read out: 70 characters as written, 210 spoken.
    assert client.post("/v1/audio/speech", json=speech(input="7 " * 35)).json()["error"]["code"] == "speech_too_long"
    assert client.post("/v1/audio/speech", json=speech(input="7 " * 30)).status_code == 200


def test_the_deepgram_route_refuses_it_in_its_shape(client):
    prepared = prepared_texts(client.app)
    response = client.post("/v1/speak?model=aura-2-thalia-en", json={"text": EXPANDING["input"],
                                                                      "pronunciations": EXPANDING["pronunciations"]})
    assert response.status_code == 400, response.text
    assert response.json()["err_code"] == "SPEECH_TOO_LONG"
    assert prepared == []


def test_a_speak_over_the_turns_budget_is_dropped_and_the_session_goes_on(client):
    with client.websocket_connect("/v1/speak?model=ryan&encoding=linear16") as socket:
        assert json.loads(socket.receive_text())["type"] == "Metadata"
        socket.send_text(json.dumps({"type": "Speak", "text": "a " * 1000,
                                     "pronunciations": EXPANDING["pronunciations"]}))
        error = json.loads(socket.receive_text())
        assert (error["type"], error["variant"]) == ("Error", "SPEECH_TOO_LONG"), error
        # Within a turn Speaks add up (60 spoken characters each: the fourth is over 200); a Flush
        # starts the next turn's count.
        for speaks in (4, 1):
            for _ in range(speaks):
                socket.send_text(json.dumps({"type": "Speak", "text": "7 " * 10}))
            socket.send_text(json.dumps({"type": "Flush"}))
            answers = []
            while not answers or answers[-1].get("type") != "Flushed":
                message = socket.receive()
                if message.get("text"):
                    answers.append(json.loads(message["text"]))
            errors = [answer.get("variant") for answer in answers if answer["type"] == "Error"]
            assert errors == (["SPEECH_TOO_LONG"] if speaks == 4 else [])
