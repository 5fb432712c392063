"""The speak socket's limits (api/deepgram/socket.py): what one message, one Speak and one turn
may hold, how long a connection may sit idle or leave its audio unread; each answered in
Deepgram's protocol, and none of them able to hold the event loop."""
from __future__ import annotations

import asyncio
import json
import socket
import struct
import threading
import time
from contextlib import contextmanager
from typing import Iterator

import httpx
import pytest
import websockets
from deepgram import DeepgramClient, DeepgramClientOptions, SpeakWebSocketEvents, SpeakWSOptions
from websockets.client import ClientProtocol
from websockets.protocol import State
from websockets.uri import parse_uri

from api.deepgram import socket as socket_module
from api.deepgram.socket import CLOSE_SECONDS
from api.speech.text_stream import TextStream
from tests.api.conftest import FAST_SETTINGS, start_server
from tests.api.live.test_deepgram import ws_url

LIMITS = dict(socket_max_message_bytes=4096, socket_max_speak_chars=200, socket_max_turn_chars=500, max_word_chars=40)
# A fraction of a second of audio for a turn of 500 characters: the limits' tests look at text.
SHORT_AUDIO = dict(audio_seconds_per_char=0.001, min_audio_seconds=0.3)
TIMEOUTS = dict(socket_idle_seconds=1.0, socket_send_timeout_seconds=1.0)
PCM_BYTES_PER_SECOND = 24000 * 2  # linear16 at 24 kHz, the socket's default


@pytest.fixture(scope="module")
def limited(chorus_cache):
    with start_server(api_key=None, settings={**SHORT_AUDIO, **LIMITS}) as live:
        yield live


@pytest.fixture(scope="module")
def impatient(chorus_cache):
    with start_server(api_key=None, settings={**FAST_SETTINGS, **TIMEOUTS}) as live:
        yield live


def words(first: int, count: int) -> str:
    """`count` numbered words ("w7 w8 …"): which of them a turn was given shows which Speaks it kept."""
    return " ".join(f"w{n}" for n in range(first, first + count))


@contextmanager
def turn_texts(live) -> Iterator[list[list[str]]]:
    """The texts each turn the server starts is given, turn by turn, while inside."""
    planner = live.app.state.planner
    turns: list[list[str]] = []
    plan_live = planner.plan_live

    def recording(*args, **kwargs):
        segments = plan_live(*args, **kwargs)
        texts: list[str] = []
        turns.append(texts)
        extend = segments.extend
        segments.extend = lambda more: (texts.extend(more), extend(more))[1]
        return segments

    planner.plan_live = recording
    try:
        yield turns
    finally:
        del planner.plan_live


async def exchange(url: str, messages: list, flushes: int, wait_s: float = 60) -> list:
    """Sends `messages` (dicts as JSON, str and bytes as they are), then collects frames (bytes, or
    the parsed JSON) until `flushes` Flushed have come."""
    frames: list = []
    async with websockets.connect(url) as ws:
        for message in messages:
            await ws.send(json.dumps(message) if isinstance(message, dict) else message)
        while sum(isinstance(f, dict) and f["type"] == "Flushed" for f in frames) < flushes:
            frame = await asyncio.wait_for(ws.recv(), wait_s)
            frames.append(frame if isinstance(frame, bytes) else json.loads(frame))
    return frames


def of_type(frames: list, kind: str) -> list[dict]:
    return [f for f in frames if isinstance(f, dict) and f["type"] == kind]


def speak(text: str) -> dict:
    return {"type": "Speak", "text": text}


FLUSH = {"type": "Flush"}


def test_a_message_over_the_byte_limit_is_dropped_unread_and_the_session_goes_on(limited):
    limit = LIMITS["socket_max_message_bytes"]
    accented = json.dumps(speak("é" * (limit // 2)), ensure_ascii=False)  # fewer characters than bytes
    assert len(accented) < limit < len(accented.encode())
    with turn_texts(limited) as turns:
        frames = asyncio.run(exchange(ws_url(limited), [json.dumps(speak("x " * limit)), accented,
                                                         speak("Hello there."), FLUSH], flushes=1))
    errors = of_type(frames, "Error")
    assert [e["variant"] for e in errors] == ["MESSAGE_TOO_LARGE"] * 2 and str(limit) in errors[0]["description"]
    assert turns == [["Hello there."]] and any(isinstance(f, bytes) for f in frames)


@contextmanager
def handshaken(live) -> Iterator[tuple[socket.socket, ClientProtocol]]:
    """A bare socket whose WebSocket handshake is done, and websockets' (sans-I/O) protocol for
    it: frames are written and read by hand."""
    protocol = ClientProtocol(parse_uri(ws_url(live)))
    with socket.create_connection((protocol.uri.host, protocol.uri.port), timeout=10) as sock:
        protocol.send_request(protocol.connect())
        sock.sendall(b"".join(protocol.data_to_send()))
        while protocol.state is State.CONNECTING and (data := sock.recv(4096)):
            protocol.receive_data(data)
        assert protocol.state is State.OPEN, protocol.handshake_exc
        yield sock, protocol


def test_a_message_far_over_the_limit_ends_the_connection_with_1009_and_why(limited):
    """uvicorn's own bound (ws_max_size), a little above the socket's: a 1 MB message is refused
    from its frame header with 1009, not buffered and parsed. What the client still sends of it
    is read and discarded, not reset (a reset can overtake the close frame, and the client never
    learns why), and the server then closes its side."""
    with handshaken(limited) as (sock, protocol):
        protocol.send_text(json.dumps(speak("x " * 500_000)).encode())
        frame = b"".join(protocol.data_to_send())
        sock.sendall(frame[:100_000])
        time.sleep(1)  # the server has read the header, and answered
        sock.sendall(frame[100_000:])  # a reset would fail this
        while data := sock.recv(65536):  # until the server's end of the connection
            protocol.receive_data(data)
    assert protocol.close_rcvd is not None and protocol.close_rcvd.code == 1009 and protocol.close_rcvd.reason
    frames = asyncio.run(exchange(ws_url(limited), [speak("Still here."), FLUSH], flushes=1))
    assert of_type(frames, "Flushed") == [{"type": "Flushed", "sequence_id": 0}]


def test_a_deeply_nested_message_is_warned_about_and_the_session_goes_on(limited):
    nested = '{"type": "Speak", "text": "Hi.", "x": %s}' % ("[" * 1500 + "]" * 1500)
    frames = asyncio.run(exchange(ws_url(limited), [nested, speak("Fine."), FLUSH], flushes=1))
    assert [w["warn_code"] for w in of_type(frames, "Warning")] == ["INVALID_MESSAGE"]
    assert of_type(frames, "Flushed") and any(isinstance(f, bytes) for f in frames)


def test_a_message_of_no_known_type_is_warned_about_and_the_session_goes_on(limited):
    odd = [{"text": "Hi."}, {"type": 5}, {"type": ["Speak"]}, {"type": "Shout"}]
    frames = asyncio.run(exchange(ws_url(limited), [*odd, speak("Fine."), FLUSH], flushes=1))
    assert [w["warn_code"] for w in of_type(frames, "Warning")] == ["UNKNOWN_MESSAGE_TYPE"] * 4
    assert of_type(frames, "Flushed") and any(isinstance(f, bytes) for f in frames)


def test_speak_and_turn_limits_drop_only_the_speak_and_the_next_turn_starts_from_zero(limited):
    """A Speak over 200 characters, or one that would take its turn over 500, is refused with
    TEXT_TOO_LONG; the turn keeps the text it had; after a Flush, and after a Clear, a turn
    starts from zero."""
    over_speak = words(0, 60)  # 60 words: > 200 characters
    a, b, c, d = words(100, 40), words(200, 40), words(300, 40), words(400, 10)  # 199, 199, 199, 49
    assert len(over_speak) > 200 >= max(map(len, (a, b, c))) and len(a + b + c) > 500 >= len(a + b + d) + 2
    e, f = words(500, 40), words(600, 40)
    first = [speak(over_speak), speak(a + " "), speak(b + " "), speak(c + " "), speak(d), FLUSH]
    second = [speak(e + " "), speak(e + " "), FLUSH]  # 400 characters: within a new turn's 500
    third = [speak(f + " "), speak(f + " "), {"type": "Clear"}, speak(f + " "), speak(f), FLUSH]

    async def run() -> list:
        frames: list = []
        async with websockets.connect(ws_url(limited)) as ws:
            for flushes, messages in enumerate((first, second, third), start=1):
                for message in messages:
                    await ws.send(json.dumps(message))
                while len(of_type(frames, "Flushed")) < flushes:
                    frame = await asyncio.wait_for(ws.recv(), 60)
                    frames.append(frame if isinstance(frame, bytes) else json.loads(frame))
        return frames

    with turn_texts(limited) as turns:
        frames = asyncio.run(run())
    errors = of_type(frames, "Error")
    assert [e["variant"] for e in errors] == ["TEXT_TOO_LONG"] * 2, errors
    assert "200" in errors[0]["description"] and "500" in errors[1]["description"]
    assert " ".join(turns[0]).split() == f"{a} {b} {d}".split()
    assert " ".join(turns[1]).split() == f"{e} {e}".split()
    assert " ".join(turns[-1]).split() == f"{f} {f}".split()  # the Clear dropped the turn before it
    assert [m["sequence_id"] for m in of_type(frames, "Flushed")] == [0, 1, 2]


def test_a_run_too_long_to_cut_is_refused_counting_the_word_it_continues(limited):
    """max_word_chars is 40: "a" * 30 then "b" * 11 makes a 41-character word, refused whole
    (WORD_TOO_LONG); "b" * 10 makes 40, accepted. No text is taken and then dropped."""
    messages = [speak("Hello " + "a" * 30), speak("b" * 11 + " never"), speak("b" * 10 + " tail."),
                speak("c" * 41), FLUSH]
    with turn_texts(limited) as turns:
        frames = asyncio.run(exchange(ws_url(limited), messages, flushes=1))
    errors = of_type(frames, "Error")
    assert [e["variant"] for e in errors] == ["WORD_TOO_LONG"] * 2 and "41" in errors[0]["description"]
    assert " ".join(turns[0]).split() == ["Hello", "a" * 30 + "b" * 10, "tail."]


def on_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


@contextmanager
def where_messages_are_handled() -> Iterator[list[tuple[str, int, bool]]]:
    """(what, characters, on the event loop) for each message parsed and each text cut, while inside."""
    calls: list[tuple[str, int, bool]] = []
    parse, add = socket_module.parse_message, TextStream.add

    def parsing(raw: str, *args):
        calls.append(("parse", len(raw), on_event_loop()))
        return parse(raw, *args)

    def adding(stream: TextStream, text: str) -> list[str]:
        calls.append(("cut", len(text), on_event_loop()))
        return add(stream, text)

    socket_module.parse_message, TextStream.add = parsing, adding
    try:
        yield calls
    finally:
        socket_module.parse_message, TextStream.add = parse, add


def test_a_megabyte_speak_does_not_hold_the_event_loop(chorus_cache):
    """With limits raised to let it in, 1 MB of words in one Speak is parsed and cut on a worker
    thread, while /health answers within a second throughout (before, cutting it took minutes on
    the loop), and a short message stays on the loop; the session is then cleared and speaks on."""
    big = dict(socket_max_message_bytes=2 * 1024 * 1024, socket_max_speak_chars=1_100_000,
               socket_max_turn_chars=1_100_000, max_spoken_chars=1_100_000, max_speech_seconds=1e6)
    with start_server(api_key=None, settings={**FAST_SETTINGS, **big}) as live, where_messages_are_handled() as calls:
        latencies: list[float] = []
        done = threading.Event()

        def probe() -> None:
            while not done.is_set():
                started = time.monotonic()
                httpx.get(f"{live.url}/health", timeout=30).raise_for_status()
                latencies.append(time.monotonic() - started)
                time.sleep(0.05)

        async def run() -> list:
            frames: list = []
            async with websockets.connect(ws_url(live)) as ws:
                await ws.send(json.dumps(speak("word " * 200_000)))
                while not frames or not isinstance(frames[-1], bytes):  # the first audio: the text was cut
                    frames.append(await asyncio.wait_for(ws.recv(), 120))
                await ws.send(json.dumps({"type": "Clear"}))
                await ws.send(json.dumps(speak("Hello there.")))
                await ws.send(json.dumps(FLUSH))
                while not of_type(frames, "Flushed"):
                    frame = await asyncio.wait_for(ws.recv(), 60)
                    frames.append(frame if isinstance(frame, bytes) else json.loads(frame))
            return frames

        prober = threading.Thread(target=probe)
        prober.start()
        try:
            frames = asyncio.run(run())
        finally:
            done.set()
            prober.join()
    assert of_type(frames, "Cleared") and of_type(frames, "Flushed") == [{"type": "Flushed", "sequence_id": 0}]
    assert len(latencies) > 5 and max(latencies) < 1.0, sorted(latencies)[-5:]
    assert [on_loop for what, size, on_loop in calls if size >= 1_000_000] == [False, False]  # parse, cut
    assert ("cut", len("Hello there."), True) in calls


def test_an_idle_socket_is_told_and_closed_with_a_reason(impatient):
    async def run() -> tuple[float, list, websockets.ConnectionClosed]:
        frames = []
        # NOTE: timed from before the handshake: the server's idle clock starts after it begins,
        # so the close can never come sooner than the idle time after this, however late the
        # handshake returns here (a loaded machine once took 0.4 s).
        started = time.monotonic()
        async with websockets.connect(ws_url(impatient)) as ws:
            with pytest.raises(websockets.ConnectionClosed) as closed:
                while True:
                    frames.append(json.loads(await asyncio.wait_for(ws.recv(), 30)))
            return time.monotonic() - started, frames, closed.value

    elapsed, frames, closed = asyncio.run(run())
    assert [f["type"] for f in frames] == ["Metadata", "Warning"] and frames[1]["warn_code"] == "IDLE_TIMEOUT"
    assert closed.rcvd is not None and closed.rcvd.code == 1000 and "idle" in closed.rcvd.reason
    assert TIMEOUTS["socket_idle_seconds"] <= elapsed < TIMEOUTS["socket_idle_seconds"] + 2


def test_a_socket_is_not_idle_while_its_audio_plays(impatient):
    """A reply of several seconds synthesizes faster than it plays: the connection stays open
    until the listener has heard it, then for the idle time."""
    async def run() -> tuple[float, float, float]:
        audio = 0
        async with websockets.connect(ws_url(impatient)) as ws:
            await ws.send(json.dumps(speak("A reply that plays longer than idle.")))
            await ws.send(json.dumps(FLUSH))
            started = time.monotonic()
            first = None
            with pytest.raises(websockets.ConnectionClosed):
                while True:
                    frame = await asyncio.wait_for(ws.recv(), 30)
                    if isinstance(frame, bytes):
                        audio += len(frame)
                        first = first or time.monotonic() - started
            return first, audio / PCM_BYTES_PER_SECOND, time.monotonic() - started

    first_audio, seconds, closed_after = asyncio.run(run())
    assert seconds > 2 * TIMEOUTS["socket_idle_seconds"]
    assert first_audio + seconds <= closed_after < first_audio + seconds + TIMEOUTS["socket_idle_seconds"] + 2


def test_a_turn_left_without_its_flush_does_not_keep_the_socket_open(impatient):
    async def run() -> tuple[list, websockets.ConnectionClosed]:
        frames = []
        async with websockets.connect(ws_url(impatient)) as ws:
            await ws.send(json.dumps(speak("Hello there. And then")))  # a turn, its Flush never sent
            with pytest.raises(websockets.ConnectionClosed) as closed:
                while True:
                    frame = await asyncio.wait_for(ws.recv(), 30)
                    frames.append(frame if isinstance(frame, bytes) else json.loads(frame))
            return frames, closed.value

    frames, closed = asyncio.run(run())
    assert isinstance(frames[1], bytes) and frames[-1]["type"] == "Warning" and closed.rcvd.code == 1000


def test_the_deepgram_sdk_sees_the_idle_close_as_a_warning_and_an_orderly_close(impatient):
    events: list[str] = []
    closed = threading.Event()
    connection = DeepgramClient("unused", DeepgramClientOptions(url=impatient.url)).speak.websocket.v("1")
    connection.on(SpeakWebSocketEvents.Warning, lambda _, warning, **kw: events.append(warning.warn_code))
    connection.on(SpeakWebSocketEvents.Error, lambda _, error, **kw: events.append("error"))
    connection.on(SpeakWebSocketEvents.Close, lambda _, close, **kw: (events.append("close"), closed.set()))
    assert connection.start(SpeakWSOptions(model="aura-2-thalia-en", encoding="linear16", sample_rate=24000))
    assert closed.wait(10)
    connection.finish()
    assert events[:2] == ["IDLE_TIMEOUT", "close"] and "error" not in events


def tcp_state(sock: socket.socket) -> int:
    """Linux's TCP state of a connected socket (1: ESTABLISHED, 7: CLOSE)."""
    return struct.unpack("B", sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1))[0]


def test_a_client_that_reads_nothing_is_let_go(impatient):
    """A client with a small receive window that reads nothing after the handshake: a send
    waits past the send timeout, the session ends (its engine requests freed), and the server
    aborts the connection, whose close frame could not get through (the client sees a reset)."""
    send_timeout = TIMEOUTS["socket_send_timeout_seconds"]
    engine = impatient.engine

    async def run() -> tuple[float | None, float | None]:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connecting: a small window
        sock.connect(("127.0.0.1", int(impatient.url.rsplit(":", 1)[1])))
        sock.setblocking(False)
        async with websockets.connect(ws_url(impatient), sock=sock, max_queue=1, ping_interval=None) as ws:
            await ws.send(json.dumps(speak("A reply for a client that never reads a byte of it. " * 30)))
            await ws.send(json.dumps(FLUSH))
            sent = time.monotonic()
            while engine.stats.num_running == 0 and time.monotonic() - sent < 10:
                await asyncio.sleep(0.05)
            freed = reset = None
            while time.monotonic() - sent < send_timeout + CLOSE_SECONDS + 20 and reset is None:
                if freed is None and engine.stats.num_running == 0 and engine.stats.kv_blocks_used == 0:
                    freed = time.monotonic() - sent
                if tcp_state(sock) != 1:
                    reset = time.monotonic() - sent
                await asyncio.sleep(0.1)
            return freed, reset

    freed, reset = asyncio.run(run())
    assert freed is not None and freed < send_timeout + 5, freed
    assert reset is not None, "the server still holds the connection"
    frames = asyncio.run(exchange(ws_url(impatient), [speak("Next, please."), FLUSH], flushes=1))
    assert of_type(frames, "Flushed") == [{"type": "Flushed", "sequence_id": 0}]
