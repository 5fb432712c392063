"""The speech pipeline's errors (api/speech/errors.py), mapped once from what stopped a speech, as
each protocol renders them: OpenAI's body and headers, Deepgram's REST answer and its socket's
messages with the request outcome they count as."""
from __future__ import annotations

import pytest

from api.deepgram.errors import DeepgramError, turn_refused
from api.http.draining import DRAIN_RETRY_AFTER_SECONDS, ShuttingDown
from api.openai.errors import ApiError
from api.speech.catalog import Catalog
from api.speech.errors import SpeechError, outcome_of, speech_error
from api.speech.planning import NothingToSpeak
from engine.errors import EngineDeadError, RequestRejected
from model.families.base import VoiceNotFoundError

DEFAULT_RETRY = 7


def mapped(exc: BaseException) -> SpeechError:
    error = speech_error(exc, DEFAULT_RETRY)
    assert error is not None
    return error


def openai(exc: BaseException) -> tuple:
    error = ApiError.of(mapped(exc))
    return error.status, error.code, error.param, error.message, error.headers


def deepgram(exc: BaseException) -> tuple:
    error = DeepgramError.of(mapped(exc))
    return error.status, error.err_code, error.err_msg, error.headers


def socket(exc: BaseException) -> tuple:
    message, outcome = turn_refused(mapped(exc))
    return message["type"], message.get("variant") or message.get("warn_code"), message["description"], outcome


def test_busy_engine_is_429_with_its_own_estimate_or_the_default():
    estimated = RequestRejected("no room", "overloaded", 2.2)
    assert openai(estimated) == (429, "overloaded", None, "The server is busy: no room", {"Retry-After": "3"})
    assert deepgram(estimated) == (429, "TOO_MANY_REQUESTS", "The server is busy: no room", {"Retry-After": "3"})
    assert socket(estimated) == ("Error", "TOO_MANY_REQUESTS", "The turn's text was not spoken: no room", "rejected")
    full = RequestRejected("queue full", "queue_full")
    assert openai(full)[4] == {"Retry-After": str(DEFAULT_RETRY)}
    assert deepgram(full)[:2] == (429, "TOO_MANY_REQUESTS")


def test_a_prompt_the_engine_refuses_is_about_the_text():
    exc = RequestRejected("too long", "context_length_exceeded")
    assert openai(exc) == (400, "context_length_exceeded", "input", "too long", {})
    assert deepgram(exc) == (400, "INVALID_TEXT", "The text cannot be spoken: too long", {})
    assert socket(exc) == ("Error", "CONTEXT_LENGTH_EXCEEDED", "The turn's text was not spoken: too long", "invalid")


def test_nothing_to_speak():
    exc = NothingToSpeak("only punctuation")
    assert openai(exc) == (400, "invalid_value", "input", "The input cannot be spoken: only punctuation", {})
    assert deepgram(exc) == (400, "INVALID_TEXT", "The text cannot be spoken: only punctuation", {})
    assert socket(exc) == ("Warning", "NOTHING_TO_SPEAK", "The turn's text was not spoken: only punctuation",
                           "invalid")


def test_shutting_down_says_when_to_retry():
    exc = ShuttingDown("draining")
    retry = {"Retry-After": str(DRAIN_RETRY_AFTER_SECONDS)}
    assert openai(exc) == (503, "shutting_down", None, "draining", retry)
    assert deepgram(exc) == (503, "SHUTTING_DOWN", "draining", retry)
    assert socket(exc) == ("Error", "SHUTTING_DOWN", "The turn's text was not spoken: draining", "unavailable")


def test_a_dead_engine():
    exc = EngineDeadError("core exited")
    assert openai(exc) == (503, "engine_dead", None, "The engine has stopped; see the server log", {})
    assert deepgram(exc) == (503, "ENGINE_DEAD", "The engine has stopped; see the server log", {})
    assert socket(exc) == ("Error", "SYNTHESIS_FAILED", "The turn's audio stopped: core exited", "error")


def test_an_unknown_voice_is_404_naming_it():
    assert openai(VoiceNotFoundError("nobody"))[:3] == (404, "voice_not_found", "voice")


@pytest.mark.parametrize("exc", [RuntimeError("a bug"), KeyError("x")])
def test_anything_else_is_no_answer(exc):
    assert speech_error(exc, DEFAULT_RETRY) is None


def test_outcomes():
    assert [outcome_of(status) for status in (400, 404, 429, 503, 500)] == [
        "invalid", "invalid", "rejected", "unavailable", "error"]


class Frontend:
    model_name, voices, languages, reads_instructions = "m", ("v",), ("auto", "english"), False
    clones = always_normalizes = False

    def __init__(self, word_timestamps: bool) -> None:
        self.word_timestamps = word_timestamps


def test_word_timestamps_are_checked_once_for_every_protocol():
    timed, untimed = Catalog(Frontend(True)), Catalog(Frontend(False))
    assert [timed.asks_word_timestamps(value) for value in (None, "none", "word")] == [False, False, True]
    assert untimed.asks_word_timestamps("none") is False
    with pytest.raises(SpeechError) as bad_value:
        timed.asks_word_timestamps("char")
    with pytest.raises(SpeechError) as unsupported:
        untimed.asks_word_timestamps("word")
    assert (bad_value.value.status, bad_value.value.param) == (400, "timestamps")
    assert "cannot time words" in unsupported.value.message
    assert (ApiError.of(unsupported.value).code, ApiError.of(unsupported.value).param) == ("unsupported_value",
                                                                                          "timestamps")
    assert DeepgramError.of(bad_value.value).err_code == "INVALID_QUERY_PARAMETER"
    assert DeepgramError.of(unsupported.value).err_code == "INVALID_QUERY_PARAMETER"
