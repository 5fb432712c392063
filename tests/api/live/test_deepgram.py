"""Deepgram's speak API (REST and WebSocket) driven by Deepgram's own Python SDK (deepgram-sdk
4.8, unmodified but for the base URL) and by a bare WebSocket client for what the SDK hides
(frame order, barge-in timing, the engine's blocks afterwards)."""
from __future__ import annotations

import asyncio
import io
import json
import threading
import time

import av
import httpx
import pytest
import websockets
from deepgram import (DeepgramApiError, DeepgramClient, DeepgramClientOptions, SpeakOptions, SpeakWebSocketEvents,
                      SpeakWSOptions)

from tests.api.audio_check import decode
from tests.api.conftest import API_KEY

TEXT = "Hello there. How are you today?"


def sdk(server) -> DeepgramClient:
    return DeepgramClient(API_KEY, DeepgramClientOptions(url=server.url))


def ws_url(server, **query) -> str:
    params = "&".join(f"{k}={v}" for k, v in {"model": "aura-2-thalia-en", **query}.items())
    return f"{server.url.replace('http', 'ws')}/v1/speak?{params}"


def test_sdk_rest_streams_wav_with_deepgrams_headers(server):
    response = sdk(server).speak.rest.v("1").stream_memory(
        {"text": TEXT}, SpeakOptions(model="aura-2-thalia-en", encoding="linear16", container="wav", sample_rate=16000))
    assert response.content_type == "audio/wav" and response.model_name == "aura-2-thalia-en"
    assert int(response.characters) == len(TEXT) and response.request_id
    audio = decode(response.stream_memory.getvalue())
    assert (audio.sample_rate, audio.channels) == (16000, 1) and audio.seconds > 0.2


@pytest.mark.parametrize("options, rate, codec", [
    ({}, 22050, "mp3float"),  # Deepgram's default encoding (FFmpeg's mp3 decoder)
    ({"encoding": "mulaw"}, 8000, "pcm_mulaw"),  # in a WAV file unless container=none
    ({"encoding": "alaw", "sample_rate": 16000}, 16000, "pcm_alaw"),
    ({"encoding": "opus"}, 48000, "opus"),
])
def test_sdk_rest_encodings_decode_as_what_they_claim(server, options, rate, codec):
    response = sdk(server).speak.rest.v("1").stream_memory({"text": TEXT}, SpeakOptions(**options))
    with av.open(io.BytesIO(response.stream_memory.getvalue())) as container:
        stream = container.streams.audio[0]
        assert stream.codec_context.name == codec and stream.sample_rate == rate
        assert sum(frame.samples for frame in container.decode(stream)) > 0.2 * rate


def test_rest_errors_have_deepgrams_shape(server):
    client = sdk(server).speak.rest.v("1")
    with pytest.raises(DeepgramApiError, match="No such model"):
        client.stream_memory({"text": TEXT}, SpeakOptions(model="aura-2-nobody-en"))
    with pytest.raises(DeepgramApiError, match="sample_rate"):
        client.stream_memory({"text": TEXT}, SpeakOptions(encoding="mulaw", sample_rate=24000))
    bare = httpx.post(f"{server.url}/v1/speak", json={"text": TEXT})
    assert bare.status_code == 401
    assert set(bare.json()) == {"err_code", "err_msg", "request_id"} and bare.json()["err_code"] == "INVALID_AUTH"
    empty = httpx.post(f"{server.url}/v1/speak", json={"text": " "}, headers={"Authorization": f"Token {API_KEY}"})
    assert empty.status_code == 400 and empty.json()["err_code"] == "INVALID_TEXT"


def test_sdk_websocket_speaks_token_by_token_then_flushes_and_clears(server):
    events: list[tuple[str, object]] = []
    flushed, cleared = threading.Event(), threading.Event()
    connection = sdk(server).speak.websocket.v("1")
    # The SDK calls each handler with the client and one keyword argument named after the event.
    connection.on(SpeakWebSocketEvents.Metadata, lambda _, **kw: events.append(("metadata", kw)))
    connection.on(SpeakWebSocketEvents.AudioData, lambda _, data, **kw: events.append(("audio", len(data))))
    connection.on(SpeakWebSocketEvents.Flushed, lambda _, **kw: (events.append(("flushed", kw)), flushed.set()))
    connection.on(SpeakWebSocketEvents.Cleared, lambda _, **kw: (events.append(("cleared", kw)), cleared.set()))
    assert connection.start(SpeakWSOptions(model="aura-2-thalia-en", encoding="linear16", sample_rate=24000))
    for word in TEXT.split(" "):  # an LLM's tokens, each with the space before the next
        connection.send_text(word + " ")
    connection.flush()
    assert flushed.wait(60)
    kinds = [kind for kind, _ in events]
    assert kinds.count("metadata") == 1 and kinds.index("metadata") < kinds.index("audio")
    assert kinds[-1] == "flushed" and sum(n for kind, n in events if kind == "audio") > 0.2 * 24000 * 2
    events.clear()
    connection.send_text("This reply is interrupted by the caller before it ends. ")
    time.sleep(0.3)
    connection.clear()
    assert cleared.wait(30)
    time.sleep(0.5)
    assert [kind for kind, _ in events if kind != "audio"] == ["cleared"]
    assert [kind for kind, _ in events][-1] == "cleared"  # nothing after the Cleared
    connection.finish()


async def socket_session(url: str, messages: list[dict], until: str, subprotocols=None, headers=None) -> list:
    """Sends `messages`, then collects frames (bytes, or the parsed JSON) until one of type `until`."""
    frames = []
    async with websockets.connect(url, subprotocols=subprotocols, additional_headers=headers) as ws:
        for message in messages:
            await ws.send(json.dumps(message))
        while True:
            frame = await asyncio.wait_for(ws.recv(), 60)
            frames.append(frame if isinstance(frame, bytes) else json.loads(frame))
            if isinstance(frames[-1], dict) and frames[-1]["type"] == until:
                return frames


def test_flushes_answer_in_order_after_their_audio_and_blocks_return(server):
    auth = {"Authorization": f"Token {API_KEY}"}
    messages = [{"type": "Speak", "text": "First turn."}, {"type": "Flush"},
                {"type": "Flush"},  # nothing new: answered right after the first
                {"type": "Speak", "text": "Second turn, a little longer than the first."}, {"type": "Flush"}]
    frames = asyncio.run(socket_session(ws_url(server, encoding="mulaw"), messages, "Flushed", headers=auth))
    frames += asyncio.run(socket_session(ws_url(server), [{"type": "Speak", "text": "Again."}, {"type": "Flush"}],
                                         "Flushed", headers=auth))
    assert frames[0]["type"] == "Metadata" and isinstance(frames[1], bytes)
    deadline = time.monotonic() + 10
    while server.engine.stats.kv_blocks_used and time.monotonic() < deadline:
        time.sleep(0.1)
    assert server.engine.stats.kv_blocks_used == 0


def test_turns_keep_their_order_and_each_flush_follows_its_audio(server):
    auth = {"Authorization": f"Token {API_KEY}"}
    messages = [{"type": "Speak", "text": "One."}, {"type": "Flush"}, {"type": "Flush"},
                {"type": "Speak", "text": "Two, which is longer."}, {"type": "Flush"}]

    async def run():
        frames = []
        async with websockets.connect(ws_url(server), additional_headers=auth) as ws:
            for message in messages:
                await ws.send(json.dumps(message))
            while len([f for f in frames if isinstance(f, dict) and f["type"] == "Flushed"]) < 3:
                frame = await asyncio.wait_for(ws.recv(), 60)
                frames.append(frame if isinstance(frame, bytes) else json.loads(frame))
        return frames

    frames = asyncio.run(run())
    marks = [(i, f["sequence_id"]) for i, f in enumerate(frames) if isinstance(f, dict) and f["type"] == "Flushed"]
    assert [sequence for _, sequence in marks] == [0, 1, 2]
    (first, _), (second, _), (third, _) = marks
    assert any(isinstance(f, bytes) for f in frames[:first])  # turn one's audio, then Flushed 0
    assert second == first + 1  # Flushed 1 had no audio of its own
    assert any(isinstance(f, bytes) for f in frames[second:third])  # turn two's audio after both


def test_clear_stops_audio_at_once_and_frees_the_engine(server):
    auth = {"Authorization": f"Token {API_KEY}"}
    long_text = "This is a long answer that the caller interrupts. " * 6

    async def run():
        async with websockets.connect(ws_url(server), additional_headers=auth) as ws:
            await ws.send(json.dumps({"type": "Speak", "text": long_text}))
            while not isinstance(await asyncio.wait_for(ws.recv(), 60), bytes):
                pass  # Metadata, then audio is flowing
            await ws.send(json.dumps({"type": "Clear"}))
            after = []
            while True:
                frame = await asyncio.wait_for(ws.recv(), 30)
                if not isinstance(frame, bytes) and json.loads(frame)["type"] == "Cleared":
                    break
                after.append(frame)
            # Whatever was already on its way came before the Cleared; nothing follows it.
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(ws.recv(), 1.0)
            return after

    asyncio.run(run())
    deadline = time.monotonic() + 10
    while server.engine.stats.kv_blocks_used and time.monotonic() < deadline:
        time.sleep(0.1)
    assert server.engine.stats.kv_blocks_used == 0


def test_socket_auth_by_header_or_token_subprotocol_and_bad_queries_are_refused(server):
    speak = [{"type": "Speak", "text": "Hi."}, {"type": "Flush"}]
    frames = asyncio.run(socket_session(ws_url(server), speak, "Flushed", subprotocols=["token", API_KEY]))
    assert frames[-1] == {"type": "Flushed", "sequence_id": 0}
    for url, headers in ((ws_url(server), None), (ws_url(server, encoding="mp3"), {"Authorization": f"Token {API_KEY}"}),
                         (ws_url(server, model="aura-2-nobody-en"), {"Authorization": f"Token {API_KEY}"})):
        with pytest.raises(websockets.exceptions.InvalidStatus) as info:
            asyncio.run(socket_session(url, speak, "Flushed", headers=headers))
        assert info.value.response.status_code in (400, 401)


def test_unknown_messages_get_a_warning_and_the_session_goes_on(server):
    auth = {"Authorization": f"Token {API_KEY}"}
    frames = asyncio.run(socket_session(ws_url(server), [{"type": "Dance"}, {"type": "Speak", "text": "Fine."},
                                                         {"type": "Flush"}], "Flushed", headers=auth))
    warning = next(f for f in frames if isinstance(f, dict) and f["type"] == "Warning")
    assert warning["warn_code"] == warning["code"] == "UNKNOWN_MESSAGE_TYPE" and warning["description"]
    assert any(isinstance(f, bytes) for f in frames)


def test_a_turn_refused_at_capacity_is_told_and_its_flush_still_answered(chorus_cache):
    """With the only slot busy, a turn gets an Error (TOO_MANY_REQUESTS) at once, not silence;
    its Flush, sent later, is still answered, and the session goes on."""
    from tests.api.conftest import speech_body, start_server

    busy_text = "A longer sentence without a stop that keeps the only slot busy for a good while"
    with start_server(api_key=None, max_num_seqs=1, max_num_batched_tokens=64, max_queue_delay=0.25) as live:
        holder = threading.Thread(target=lambda: httpx.post(f"{live.url}/v1/audio/speech",
                                                            json=speech_body(input=busy_text), timeout=120))
        holder.start()
        deadline = time.monotonic() + 30
        while live.engine.stats.num_running == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)  # a stats report that shows the slot taken

        async def run():
            async with websockets.connect(ws_url(live)) as ws:
                assert json.loads(await ws.recv())["type"] == "Metadata"
                await ws.send(json.dumps({"type": "Speak", "text": "Hello there. And "}))
                error = json.loads(await asyncio.wait_for(ws.recv(), 30))
                await ws.send(json.dumps({"type": "Speak", "text": "more text."}))
                await ws.send(json.dumps({"type": "Flush"}))
                return error, json.loads(await asyncio.wait_for(ws.recv(), 30))

        error, flushed = asyncio.run(run())
        holder.join(120)
    assert error["type"] == "Error" and error["variant"] == "TOO_MANY_REQUESTS" and "retry" in error["description"]
    assert flushed == {"type": "Flushed", "sequence_id": 0}


def test_a_turn_sent_while_the_one_before_it_plays_continues_that_stream_and_is_not_refused(chorus_cache):
    """With the engine's only slot taken by the connection's own first turn, a second turn sent
    while the first one's audio plays is no newcomer to refuse: it continues the connection's
    stream (before, it got TOO_MANY_REQUESTS and the agent's reply was cut off), and speaks after
    the first."""
    from tests.api.conftest import start_server

    first = "A longer sentence without a stop that keeps the only slot busy for a good while."
    with start_server(api_key=None, max_num_seqs=1, max_num_batched_tokens=64, max_queue_delay=0.25) as live:
        async def run() -> list:
            frames: list = []
            async with websockets.connect(ws_url(live)) as ws:
                assert json.loads(await ws.recv())["type"] == "Metadata"
                await ws.send(json.dumps({"type": "Speak", "text": first}))
                await ws.send(json.dumps({"type": "Flush"}))
                while not any(isinstance(f, bytes) for f in frames):
                    frames.append(await asyncio.wait_for(ws.recv(), 60))
                await ws.send(json.dumps({"type": "Speak", "text": "And a second turn."}))
                await ws.send(json.dumps({"type": "Flush"}))
                while sum(1 for f in frames if isinstance(f, str) and json.loads(f)["type"] == "Flushed") < 2:
                    frames.append(await asyncio.wait_for(ws.recv(), 60))
            return [f if isinstance(f, bytes) else json.loads(f) for f in frames]

        frames = asyncio.run(run())
    messages = [f for f in frames if isinstance(f, dict)]
    assert [m for m in messages if m["type"] in ("Error", "Warning")] == []
    assert [m["sequence_id"] for m in messages if m["type"] == "Flushed"] == [0, 1]
    marks = [i for i, f in enumerate(frames) if isinstance(f, dict) and f["type"] == "Flushed"]
    assert any(isinstance(f, bytes) for f in frames[marks[0]:marks[1]])  # the second turn's audio
