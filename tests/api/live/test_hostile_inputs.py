"""Hostile inputs on every route (issue 34, "No single request can take the server down"; issue
51's pronunciations, `say-as` and phoneme runs): any input gets audio or a 4xx in its route's
own error shape (the speak socket: Warning / Error messages, or a close that says why), never a
5xx or a connection dropped without an answer;
/health keeps answering meanwhile; and a normal request is served right after. (The largest
inputs joe's front end can be given, and the API process's growth with each: the reliability
benchmark's smoke test.)

Property-based (hypothesis, derandomized and bounded) where it fits, fixed cases where it does
not (the issue's memory inputs, the idle socket). The fixed malformed
requests one by one are tests/api/test_malformed_input.py's; schema-driven fuzzing is
tests/api/live/test_openapi_fuzz.py's.
"""
from __future__ import annotations

import asyncio
import json
from contextlib import contextmanager
from html import escape
from typing import Iterator
from urllib.parse import quote, quote_from_bytes

import httpx
import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from api.openai.schemas import MAX_INPUT_CHARS
from benchmarks.hostile import (SPEAK_MESSAGE_CHARS, HealthProbe, SocketOutcome, SpeechRead, idle_socket,
                                largest_inputs, nested_json, read_speech, speak_script, speak_session, ws_url)
from tests.api.conftest import speech_body, start_server

# An audio budget of 0.2 s a segment (16 tokens at tiny-random's 82 a second: two frames of audio
# for a sentence) and one token more per 50 characters: 4,096 characters take a few seconds.
HOSTILE_BUDGET = dict(audio_seconds_per_char=0.00025, min_audio_seconds=0.2)
# Small socket timeouts, so that an idle socket is let go within seconds.
SOCKET_TIMEOUTS = dict(socket_idle_seconds=2.0, socket_send_timeout_seconds=2.0)
SOCKET_WAIT_S = 30.0
# The issue asks /health to answer within 100 ms. Here the server shares this process (and its
# GIL) with the client and the probe, on 2 cores shared with other work, where a single probe
# can be held up with nothing wrong in the server: 99 in 100 of a test's probes must answer
# within 100 ms (one in any test of under 200 probes may not) and none may take a second (a
# server whose loop is blocked misses both). Measured on the 2-core machine: p99 10 ms, the
# slowest of ~1,800 probes 25 ms; a test of 37 probes once saw one take 128 ms (in CI, while
# the upload it raced was parsed), which a nearest-rank p99 of 37 probes, their maximum, failed.
HEALTH_P99_S, HEALTH_MAX_S = 0.1, 1.0
# Each example is a round trip to a live server: shrinking a failure of up to 4,096 characters
# would take minutes, so failures are reported as found.
NO_SHRINK = (Phase.explicit, Phase.generate)


def bounded(max_examples: int):
    return settings(max_examples=max_examples, deadline=None, database=None, derandomize=True, phases=NO_SHRINK,
                    suppress_health_check=list(HealthCheck))


@pytest.fixture(scope="module")
def hostile_server(chorus_cache):
    """No key; a small audio budget, so that inputs of 4,096 characters synthesize in moments."""
    with start_server(api_key=None, settings={**HOSTILE_BUDGET, **SOCKET_TIMEOUTS}) as live:
        yield live


# --- inputs ---------------------------------------------------------------------------------

def _repeated(piece: str) -> st.SearchStrategy[str]:
    return st.integers(1, MAX_INPUT_CHARS // len(piece) + 1).map(lambda n: (piece * n)[:MAX_INPUT_CHARS])


def _chars(*ranges: tuple[int, int]) -> st.SearchStrategy[str]:
    return st.one_of(*(st.characters(min_codepoint=low, max_codepoint=high) for low, high in ranges))


# Word-only runs without a sentence end: what front ends turn into the longest prompts.
WORD_RUNS = st.sampled_from(["a ", "1 ", "1234567890123 ", "Mr. ", "3.14 ", "$5 ", "well, ", "ok... ", "I "]
                            ).flatmap(_repeated)
# Runs without whitespace past the 256 characters a word may have.
NO_WHITESPACE = st.one_of(st.sampled_from(["x", "é", "1", "-", "😀"]).flatmap(_repeated),
                          st.text(st.characters(categories=["L", "N", "P", "S"]), min_size=257,
                                  max_size=MAX_INPUT_CHARS))
PUNCTUATION = st.text(".,;:!?…—–-'\"()[]{}<>/\\|*&^%$#@~` \n", min_size=1, max_size=MAX_INPUT_CHARS)
CONTROLS = st.text(st.characters(categories=["Cc", "Cf", "Zl", "Zp"]), min_size=1, max_size=512)
# RTL scripts, combining marks (and letters buried under them), astral-plane characters, CJK.
SCRIPTS = st.text(st.one_of(_chars((0x0590, 0x06FF), (0x0300, 0x036F), (0x1F300, 0x1FAFF), (0x10000, 0x10FFFF),
                                   (0x4E00, 0x4FFF)), st.sampled_from("aé ")), min_size=1, max_size=MAX_INPUT_CHARS)
HOSTILE_TEXT = st.one_of(WORD_RUNS, NO_WHITESPACE, PUNCTUATION, CONTROLS, SCRIPTS,
                         st.lists(st.one_of(WORD_RUNS, PUNCTUATION, CONTROLS, SCRIPTS), min_size=2, max_size=4)
                         .map(lambda parts: "".join(parts)[:MAX_INPUT_CHARS]),
                         st.text(max_size=MAX_INPUT_CHARS))
# A JSON string's contents as sent: the text escaped as any JSON writer would, or escapes of lone
# (unpaired) surrogates, which Python's parser takes and no UTF-8 encoder does.
LONE_SURROGATES = st.lists(st.sampled_from([r"\ud800", r"\udfff", r"\ud83d", r"\ude00x", "a", " ", "."]),
                           min_size=1, max_size=200).map("".join)
JSON_STRING = st.one_of(HOSTILE_TEXT.map(lambda text: json.dumps(text)[1:-1]), LONE_SURROGATES)


def post(server, path: str, content: bytes | str, headers: dict | None = None) -> SpeechRead:
    """The answer to a POST of `content` to `path`, read whole."""
    async def run() -> SpeechRead:
        async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
            return await read_speech(client, path, content=content, headers=headers)

    return asyncio.run(run())


def assert_openai_shape(answer: SpeechRead) -> None:
    error = json.loads(answer.body)["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["message"], answer.body[:300]
    assert error["type"] == ("rate_limit_error" if answer.status == 429 else "invalid_request_error")


def assert_deepgram_shape(answer: SpeechRead) -> None:
    body = json.loads(answer.body)
    assert set(body) == {"err_code", "err_msg", "request_id"} and body["err_msg"], answer.body[:300]


def assert_answered(answer: SpeechRead, error_shape, case) -> None:
    """Audio, or a 4xx in the route's error shape; never a 5xx, never a connection cut short."""
    shown = repr(case)[:300]
    assert answer.dropped is None, f"connection dropped ({answer.dropped}, status {answer.status}) for {shown}"
    assert answer.status < 500, f"{answer.status} {answer.body[:300]!r} for {shown}"
    if answer.status != 200:
        assert 400 <= answer.status < 500
        error_shape(answer)


def assert_served(server) -> None:
    """A normal request right after the hostile one."""
    answer = post(server, "/v1/audio/speech", json.dumps(speech_body()), {"content-type": "application/json"})
    assert answer.status == 200 and answer.audio_bytes, (answer.outcome, answer.body[:300])


class HealthRecord:
    """Every /health probe of one test, example by example. Invariant: `latencies_s` holds the
    probes of every example that passed so far, and each of those examples' own probes all
    answered 200 within HEALTH_MAX_S."""

    def __init__(self) -> None:
        self.latencies_s: list[float] = []

    @contextmanager
    def during(self, server) -> Iterator[HealthProbe]:
        with HealthProbe(server.url) as probe:
            yield probe
        # NOTE: not reached when the case itself failed: that failure is the one to report.
        slowest = max(probe.latencies_s, default=0.0)
        assert probe.failures == 0, f"{probe.failures} of {len(probe.latencies_s)} /health probes failed"
        assert slowest <= HEALTH_MAX_S, f"/health took {1000 * slowest:.0f} ms"
        self.latencies_s += probe.latencies_s

    def assert_responsive(self) -> None:
        """At most 1 in 100 probes (and at least one may) took over HEALTH_P99_S."""
        assert self.latencies_s, "no /health probe ran"
        slow = sorted(latency for latency in self.latencies_s if latency > HEALTH_P99_S)
        allowed = max(1, len(self.latencies_s) // 100)
        assert len(slow) <= allowed, (f"{len(slow)} of {len(self.latencies_s)} /health probes took over "
                                      f"{1000 * HEALTH_P99_S:.0f} ms (slowest {1000 * slow[-1]:.0f} ms), "
                                      f"{allowed} may")


# --- the OpenAI route -------------------------------------------------------------------------

def test_any_input_text_is_audio_or_a_400_in_openai_shape(hostile_server):
    health = HealthRecord()

    @bounded(max_examples=30)
    @example(json.dumps("a " * 2048)[1:-1])
    @example(json.dumps("1 " * 2048)[1:-1])
    @example(json.dumps(largest_inputs()["13-digit numbers"])[1:-1])
    @example(json.dumps("x" * MAX_INPUT_CHARS)[1:-1])
    @example(r"\ud800")
    @given(JSON_STRING)
    def case(literal: str) -> None:
        body = '{"model": "tts-1", "voice": "alloy", "response_format": "pcm", "input": "%s"}' % literal
        with health.during(hostile_server):
            answer = post(hostile_server, "/v1/audio/speech", body, {"content-type": "application/json"})
        assert_answered(answer, assert_openai_shape, literal)
        assert_served(hostile_server)

    case()
    health.assert_responsive()


# --- pronunciations, SSML's say-as, phonemes written inline (issue 51) -------------------------

# Words an entry may name, and what may stand in their place: within and past the entry's limits
# (100 / 200 / 300 characters), brackets, phoneme runs, controls, other scripts; and texts made of
# those words, repeated up to the input limit, so that every entry applies thousands of times.
LEXICON_WORD = st.one_of(st.sampled_from(["a", "I", "US", "New York", "1", "x-ray", "é", "中", "[[", "a b c"]),
                         st.text(st.characters(categories=["L", "N", "P", "Zs"]), min_size=0, max_size=120))
REPLACEMENT = st.one_of(st.text(min_size=0, max_size=320), st.sampled_from(["x" * 300, "x" * 301, "ə" * 200,
                                                                             "[[ a ]]", "<speak>", "\x00", " "]))
ENTRY = st.one_of(
    st.builds(lambda w, r: {"word": w, "say_as": r}, LEXICON_WORD, REPLACEMENT),
    st.builds(lambda w, r: {"word": w, "phonemes": r}, LEXICON_WORD, REPLACEMENT),
    st.builds(lambda w, a, b: {"word": w, "phonemes": a, "say_as": b}, LEXICON_WORD, REPLACEMENT, REPLACEMENT),
    st.sampled_from([{}, {"word": 5}, {"word": "a", "say_as": None}, {"say_as": "x"}, "a", None, []]),
)
ENTRIES = st.lists(ENTRY, max_size=8)


def _text_of(entries: list, repeats: int) -> str:
    words = [entry["word"] for entry in entries if isinstance(entry, dict) and isinstance(entry.get("word"), str)]
    return ((" ".join(words) or "a") + " ") * repeats


PRONOUNCED = st.tuples(ENTRIES, st.integers(1, 2048)).map(lambda pair: (pair[0], _text_of(*pair)[:MAX_INPUT_CHARS]))
SAY_AS_KINDS = ["cardinal", "number", "ordinal", "characters", "spell-out", "verbatim", "digits", "telephone", "date",
                "time", "currency", "color", ""]
SAY_AS_CONTENT = st.one_of(
    st.integers(1, 1100).map(lambda n: "1" + "0" * (n - 1)),  # quantities past any name
    st.sampled_from(["12/3/2026", "2/30/2026", "3:45 pm", "25:00", "$3.50", "XYZ 3", "+1 (800) 555-1234", "3rd",
                     "1,000,000.5", "-7", "abc", "", "１２", "٣", "1" * 4000]),
    st.text(max_size=200),
)
SAY_AS = st.lists(st.tuples(st.sampled_from(SAY_AS_KINDS), SAY_AS_CONTENT,
                            st.sampled_from(["", ' format="dmy"', ' format="hms24"', ' format="GBP"', ' format="x"'])),
                  min_size=1, max_size=4)
PHONEME_RUNS = st.one_of(
    st.tuples(st.sampled_from(["ə", "ˈə", "a ", "ə ", "[[", "]]", "x", " "]), st.integers(1, 1000)).map(
        lambda pair: "[[ " + pair[0] * pair[1] + " ]]"),
    st.text(st.sampled_from("[] əˈa.!"), max_size=500),
)


def ssml_of(elements: list[tuple[str, str, str]]) -> str:
    said = " ".join(f'<say-as interpret-as="{kind}"{extra}>{escape(content)}</say-as> and'
                    for kind, content, extra in elements)
    return f"<speak>{said} so on.</speak>"[:MAX_INPUT_CHARS]


def test_any_pronunciations_are_audio_or_a_400_on_every_route(hostile_server):
    """Entries of every shape, applied to a text of their own words repeated: the expansions the
    issue found (85,000 words from one request) are refused by the spoken budget, at once."""
    health = HealthRecord()

    @bounded(max_examples=25)
    @example(([{"word": "a", "say_as": ("and so on " * 30)[:299]}], "a " * 2000))
    @example(([{"word": "a", "say_as": "x" * 300}, {"word": "b", "phonemes": "ə" * 200}], "a b " * 1000))
    @given(PRONOUNCED)
    def case(pronounced) -> None:
        entries, text = pronounced
        with health.during(hostile_server):
            openai = post(hostile_server, "/v1/audio/speech", json.dumps(speech_body(input=text, pronunciations=entries)),
                          {"content-type": "application/json"})
            deepgram = post(hostile_server, "/v1/speak", json.dumps({"text": text, "pronunciations": entries}),
                            {"content-type": "application/json"})
            socket = asyncio.run(speak_session(ws_url(hostile_server.url), [
                {"type": "Speak", "text": text[:SPEAK_MESSAGE_CHARS], "pronunciations": entries}, {"type": "Flush"}],
                SOCKET_WAIT_S))
        assert_answered(openai, assert_openai_shape, entries)
        assert_answered(deepgram, assert_deepgram_shape, entries)
        assert_socket_answered(socket, entries)
        assert_served(hostile_server)

    case()
    health.assert_responsive()


def test_any_say_as_and_phoneme_runs_are_audio_or_a_400(hostile_server):
    health = HealthRecord()

    @bounded(max_examples=25)
    @example(ssml_of([("cardinal", "1" + "0" * 1000, "")]))
    @example(ssml_of([("digits", "1" * 1000, "")] * 3))
    @example("[[ " + "ə" * 250 + " ]]")
    @given(st.one_of(SAY_AS.map(ssml_of), PHONEME_RUNS))
    def case(text: str) -> None:
        with health.during(hostile_server):
            answer = post(hostile_server, "/v1/audio/speech", json.dumps(speech_body(input=text)),
                          {"content-type": "application/json"})
        assert_answered(answer, assert_openai_shape, text)
        assert_served(hostile_server)

    case()
    health.assert_responsive()


# --- Deepgram's REST route --------------------------------------------------------------------

QUERY_PARAMS = ["model", "encoding", "container", "sample_rate", "speed"]
# A query value as it goes on the wire (httpx leaves percent-escapes as they are): any text
# percent-encoded as UTF-8, any bytes percent-encoded (often not UTF-8), raw characters with
# stray '%' and '+', and the values the issue found.
QUERY_VALUE = st.one_of(
    st.text(max_size=40).map(lambda value: quote(value, safe="")),
    st.binary(max_size=12).map(lambda raw: quote_from_bytes(raw, safe="")),
    st.text("abcz019.-_~+%=", max_size=20),
    st.sampled_from(["%E2%9C%93", "%0D%0A", "%00", "%FF", "%C3%A9", "linear16", "mulaw", "wav", "none", "16000",
                     "1.5", "nan", "1e999", "aura-2-thalia-en"]),
)
QUERY = st.dictionaries(st.sampled_from(QUERY_PARAMS), QUERY_VALUE, max_size=5)
DEEPGRAM_BODY = st.one_of(
    JSON_STRING.map(lambda literal: '{"text": "%s"}' % literal),
    st.sampled_from(["[]", '"text"', "null", "{}", '{"text": 5}', '{"text": null}', '{"text": ["Hi."]}', "{not json"]),
    st.integers(1, 40_000).map(lambda depth: '{"text": "Hi.", "x": %s}' % nested_json(depth)),
    st.binary(max_size=200),
)
CONTENT_TYPE = st.sampled_from([{"content-type": "application/json"}, {"content-type": "text/plain"}, {}])


def test_any_body_and_query_values_are_audio_or_a_4xx_in_deepgrams_shape(hostile_server):
    health = HealthRecord()

    @bounded(max_examples=30)
    @example({"model": "%E2%9C%93"}, '{"text": "Hi."}', {"content-type": "application/json"})
    @example({"encoding": "%0D%0A"}, '{"text": "Hi."}', {"content-type": "application/json"})
    @example({"speed": "%00"}, '{"text": "Hi."}', {"content-type": "application/json"})
    @example({}, '{"text": "Hi.", "x": %s}' % nested_json(30_000), {"content-type": "application/json"})
    @example({}, '{"text": "%s"}' % ("1 " * 2048), {"content-type": "application/json"})
    @given(QUERY, DEEPGRAM_BODY, CONTENT_TYPE)
    def case(query: dict, body: str | bytes, headers: dict) -> None:
        path = "/v1/speak" + ("?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else "")
        with health.during(hostile_server):
            answer = post(hostile_server, path, body, headers)
        assert_answered(answer, assert_deepgram_shape, (path, body))
        assert_served(hostile_server)

    case()
    health.assert_responsive()


# --- the speak socket -------------------------------------------------------------------------

def _speak(text: str) -> dict:
    return {"type": "Speak", "text": text}


class Elided(str):
    """A message too long to show (hypothesis prints a failing example's arguments): shown as
    its length and its start; the text itself is unchanged."""

    def __repr__(self) -> str:
        return f"<{len(self)} characters: {str.__repr__(self[:40])}…>"


def huge_speak(size: int) -> Elided:
    return Elided(json.dumps(_speak("a " * (size // 2))))


SOCKET_MESSAGE = st.one_of(
    HOSTILE_TEXT.map(_speak),
    _repeated("a ").map(_speak),  # up to 4,096 characters: over one Speak's 2,000
    st.sampled_from([{"type": "Flush"}, {"type": "Clear"}, {"type": "Speak"}, {"type": "Speak", "text": 5},
                     {"type": None}, {"text": "Hi."}]),
    st.text(max_size=20).map(lambda kind: {"type": kind}),
    st.text(max_size=100),  # mostly not JSON, or JSON that is no object
    st.binary(max_size=1000),
    st.integers(1, 40_000).map(lambda depth: '{"type": "Speak", "text": "Hi.", "x": %s}' % nested_json(depth)),
    st.sampled_from([70 * 1024, 1024 * 1024]).map(huge_speak),  # over the 64 KiB limit, and far over
)
# Sessions end with a Flush (answered) or a Close (the server's close follows what it owes).
SOCKET_SCRIPT = st.tuples(st.lists(SOCKET_MESSAGE, min_size=1, max_size=6),
                          st.sampled_from([{"type": "Flush"}, {"type": "Close"}])).map(lambda s: [*s[0], s[1]])


def assert_socket_answered(outcome: SocketOutcome, script: list) -> None:
    """Never closed abnormally, and every Flush answered (Flushed), unless an Error came before
    it or the server closed saying why."""
    shown = f"{outcome.describe()} for {repr(script)[:300]}"
    assert not outcome.dropped, shown
    assert (outcome.unanswered_flushes == 0 or outcome.of_type("Error")
            or (outcome.close_code is not None and outcome.close_reason)), shown


def assert_socket_serves(server) -> None:
    outcome = asyncio.run(speak_session(ws_url(server.url), speak_script("Hello there."), SOCKET_WAIT_S))
    assert outcome.of_type("Flushed") == [{"type": "Flushed", "sequence_id": 0}] and outcome.audio_bytes, \
        outcome.describe()


def test_any_message_sequence_is_answered_and_never_ends_the_socket_abnormally(hostile_server):
    health = HealthRecord()

    @bounded(max_examples=20)
    @example([_speak("a " * 1000), _speak("b " * 1000), _speak("c " * 1000), {"type": "Flush"}])  # turn > 4,096
    @example([huge_speak(1024 * 1024), {"type": "Flush"}])
    @example(['{"type": "Speak", "text": %s}' % nested_json(30_000), {"type": "Flush"}])
    @example([b"\x00\xff" * 10, "{not json", {"type": "Dance"}, {"type": "Clear"}, {"type": "Close"}])
    @example([{"text": "Hi."}, {"type": 5}, {"type": "Flush"}])  # a 'type' that is no string, or none
    @given(SOCKET_SCRIPT)
    def case(script: list) -> None:
        with health.during(hostile_server):
            outcome = asyncio.run(speak_session(ws_url(hostile_server.url), script, SOCKET_WAIT_S))
        assert_socket_answered(outcome, script)
        assert_socket_serves(hostile_server)

    case()
    health.assert_responsive()


@pytest.mark.parametrize("megabytes", [1, 10])
def test_a_message_far_over_the_limit_is_refused_with_a_close_frame_the_client_gets(hostile_server, megabytes):
    """Refused (1009) while most of it is still on its way: the client, still sending, must get
    the close frame and its reason, not a reset (1006)."""
    script = [huge_speak(megabytes * 1024 * 1024), {"type": "Flush"}]
    outcome = asyncio.run(speak_session(ws_url(hostile_server.url), script, SOCKET_WAIT_S))
    assert not outcome.dropped and outcome.close_reason, outcome.describe()
    assert_socket_serves(hostile_server)


def test_an_idle_socket_is_closed_with_a_reason(hostile_server):
    idle = SOCKET_TIMEOUTS["socket_idle_seconds"]
    closed_after, outcome = asyncio.run(idle_socket(ws_url(hostile_server.url), idle + 10))
    assert closed_after is not None and idle * 0.8 <= closed_after <= idle + 3, (closed_after, outcome.describe())
    assert not outcome.dropped and outcome.close_reason, outcome.describe()
    assert_socket_serves(hostile_server)


# A socket that never reads: tests/api/live/test_speak_socket_limits.py (let go, its engine requests
# freed within the send timeout) and the reliability benchmark's hostile phase.


# --- memory, on the real voice ----------------------------------------------------------------

# The largest inputs on joe, each on every route, with the API process's growth bounded
# and a normal request served after it: the reliability benchmark's hostile phase, whose quick
# run (tests/benchmarks/live/test_reliability_smoke.py) holds it to the same bounds.
