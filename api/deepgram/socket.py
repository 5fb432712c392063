"""The /v1/speak WebSocket: Deepgram's streaming text-to-speech.

Text arrives in Speak messages of any size (single LLM tokens too) and is cut into segments as
sentences complete (api/text_stream.py). The segments up to a Flush make one turn: a live speech
(api/planning.py) whose first segment starts as soon as it is cut, so speech begins before the
reply is complete, and whose later segments are prepared and prefilled while the earlier ones
play. Turns send their audio in order, each after the one before it; a Flush is answered with
Flushed once its turn's audio has left. A turn starts once the one before it has begun to speak
(or ended); while the listener still plays the connection's audio, it continues that stream
like a speech's later segment: admitted without question (an agent's reply is never cut off
between two Flushes for a newcomer's sake) and planned from when that audio runs out. Clear
drops the buffered text and every turn: their engine requests are aborted (blocks freed within
a step) and no frame of their audio leaves after the Clear is read. Asked for
(`timestamps=word`, an extension), each audio message is followed by a `Timestamps` message
with the words whose audio it starts, timed in seconds of all the audio the connection has sent.
"""
from __future__ import annotations

import asyncio
import hmac
import json
import logging
import time
import uuid

from fastapi import APIRouter, WebSocket
from starlette.websockets import WebSocketDisconnect, WebSocketState

from api.audio.pipeline import AudioPipeline
from api.auth import key_matches
from api.deepgram.errors import DeepgramError, error_message, warning_message
from api.deepgram.formats import DEFAULT_SOCKET_ENCODING, SOCKET_ENCODINGS, AudioChoice, InvalidAudioQuery, audio_choice
from api.deepgram.routes_rest import model_uuid, parse_speed
from api.deepgram.voices import DEFAULT_MODEL, UnknownModel, deepgram_voice
from api.draining import ShuttingDown
from api.planning import NothingToSpeak, SpeechSegments
from api.schemas import MAX_INPUT_CHARS
from api.synthesis import SegmentedSynthesis, SynthesisFailed
from api.text_stream import TextStream
from api.word_timeline import word_events
from engine.errors import EngineDeadError, RequestRejected
from model.families.base import SpokenWord

logger = logging.getLogger("chorus.api")
router = APIRouter()
MODEL_VERSION = "chorus"


@router.websocket("/v1/speak")
async def speak_socket(websocket: WebSocket, model: str = DEFAULT_MODEL, encoding: str | None = None,
                       sample_rate: str | None = None, speed: str | None = None,
                       timestamps: str | None = None) -> None:
    state = websocket.app.state
    request_id = str(uuid.uuid4())
    subprotocol = _authenticated(websocket, state.settings.api_key)
    try:
        if subprotocol is False:
            raise DeepgramError(401, "INVALID_AUTH", "Invalid credentials.")
        if not state.engine.is_ready:
            raise DeepgramError(503, "ENGINE_NOT_READY", "The engine is not ready yet; retry shortly")
        voice = deepgram_voice(model, state.catalog)
        choice = audio_choice(SOCKET_ENCODINGS, encoding, None, sample_rate, DEFAULT_SOCKET_ENCODING)
        speed_value = parse_speed(speed)
        words = _wants_words(timestamps, state.catalog)
    except (UnknownModel, InvalidAudioQuery) as exc:
        code = "UNKNOWN_MODEL" if isinstance(exc, UnknownModel) else "INVALID_QUERY_PARAMETER"
        await websocket.send_denial_response(DeepgramError(400, code, str(exc)).response(request_id))
        return
    except DeepgramError as exc:
        await websocket.send_denial_response(exc.response(request_id))
        return
    await websocket.accept(subprotocol=subprotocol or None)
    session = SpeakSession(websocket, state, voice, choice, speed_value, words)
    await session.send_json({"type": "Metadata", "request_id": request_id, "model_name": model,
                             "model_version": MODEL_VERSION, "model_uuid": model_uuid(model)})
    try:
        await session.run()
    except asyncio.CancelledError:
        if not session.dropped:
            raise  # the server is stopping: not ours to swallow


def _wants_words(timestamps: str | None, catalog) -> bool:
    if timestamps in (None, "none"):
        return False
    if timestamps != "word":
        raise InvalidAudioQuery("timestamps", f"timestamps must be 'word' or 'none'; got '{timestamps}'")
    if not catalog.word_timestamps:
        raise InvalidAudioQuery("timestamps", f"The model '{catalog.model_name}' cannot time words before it "
                                              "speaks them; leave out timestamps")
    return True


def _authenticated(websocket: WebSocket, api_key: str | None) -> str | bool:
    """"" when no key is needed or the Authorization header has it, "token" when the `token`
    subprotocol does (browsers cannot set headers: `new WebSocket(url, ["token", KEY])`), False
    when neither."""
    if api_key is None or key_matches(websocket.headers.get("authorization"), api_key):
        return ""
    protocols = websocket.scope.get("subprotocols") or []
    if len(protocols) >= 2 and protocols[0] == "token" and hmac.compare_digest(protocols[1].encode(), api_key.encode()):
        return "token"
    return False


class Turn:
    """The speech of the text between two Flushes: a live speech, fed as its segments are cut.
    Invariants: its synthesis starts only once the turn before it speaks or has ended (so at most
    one turn runs ahead of the one speaking), as a continuation exactly when the connection's
    listener is still playing then; its audio is sent only after the turn before it has sent all
    of its own (or been cleared), and never after `cancel`."""

    def __init__(self, session: SpeakSession, ahead: Turn | None, previous: asyncio.Task | None) -> None:
        """`ahead`: the turn before it; `previous`: what sends before it (that turn's task, or a
        Flushed answered after it)."""
        self.session = session
        engine = session.state.engine
        self.model_speed = engine.frontend.model_speed(session.speed)
        params = engine.frontend.default_sampling()
        self.segments: SpeechSegments = session.state.planner.plan_live(session.voice, self.model_speed, params)
        self.flush_id: int | None = None
        self.ended = asyncio.Event()  # its Flush (or Close) has come: no more text
        self.sending = False  # its audio is going out (the turns before it are done)
        self.speaking = asyncio.Event()  # its audio has begun to go out, or it has ended
        self.synthesis: SegmentedSynthesis | None = None
        self.task = asyncio.create_task(self._run(ahead, previous))

    def extend(self, texts: list[str]) -> None:
        self.segments.extend(texts)

    def finish(self, flush_id: int | None) -> None:
        self.flush_id = flush_id
        self.segments.finish()
        self.ended.set()

    async def _run(self, ahead: Turn | None, previous: asyncio.Task | None) -> None:
        """The turn's audio after the turn before it, then its Flushed: also when its synthesis
        failed (the client is told with an Error), so that a Flush is always answered."""
        session, state = self.session, self.session.state
        synthesis = self.synthesis = SegmentedSynthesis(
            state.engine, self.segments, session.voice, self.model_speed, state.settings.client_backlog_seconds,
            state.settings.stalled_client_seconds, on_stall=self._stalled)
        state.drain.register(synthesis)
        outcome = "disconnected"
        try:
            try:
                # NOTE: started once the turn before it speaks, beside it: its first audio is
                # ready when that ends.
                if ahead is not None:
                    await ahead.speaking.wait()
                refused = await self._start(synthesis, ahead)
                if previous is not None:
                    await asyncio.wait([previous])
                if refused is None:
                    await self._send_audio(synthesis)
                outcome = refused or "completed"
            except (SynthesisFailed, EngineDeadError) as exc:
                outcome = "error"
                await session.send_json(error_message("SYNTHESIS_FAILED", f"The turn's audio stopped: {exc}"))
            except (WebSocketDisconnect, RuntimeError):
                raise  # the client has gone: nothing to answer
            except Exception as exc:  # noqa: BLE001 - one turn's failure must not leave its Flush unanswered
                logger.exception("speak turn failed")
                outcome = "error"
                await session.send_json(error_message("INTERNAL_ERROR", f"The turn failed: {type(exc).__name__}"))
            if previous is not None:
                await asyncio.wait([previous])  # a turn that failed early still answers in order
            # NOTE: a refused or failed turn ends before its Flush arrives; the Flush still gets
            # its Flushed, so wait for it.
            await self.ended.wait()
            if self.flush_id is not None:
                await session.send_json({"type": "Flushed", "sequence_id": self.flush_id})
        except asyncio.CancelledError:
            outcome = session.cancel_reason
            raise
        except (WebSocketDisconnect, RuntimeError):
            pass  # the client has gone; the receiver ends the session
        finally:
            self.speaking.set()  # the turn after it waits no longer
            synthesis.close()
            state.metrics.count_request(outcome)

    def _stalled(self) -> bool:
        """Backpressure gave up waiting: a turn whose audio is going out has a client that
        stopped reading, and the connection is dropped (a turn still waiting for the one before
        it only has to wait)."""
        if self.sending:
            self.session.drop("the client stopped reading its audio")
        return self.sending

    async def _send_audio(self, synthesis: SegmentedSynthesis) -> None:
        self.sending = True
        session = self.session
        pipeline = AudioPipeline(session.choice.response_format, session.state.engine.sample_rate,
                                 session.choice.sample_rate, session.speed / self.model_speed)
        offset = session.seconds_sent  # where this turn's audio begins in the connection's
        async for pcm in synthesis.pcm():
            await session.send_audio(await asyncio.to_thread(pipeline.process, pcm))
            if session.is_playing():
                self.speaking.set()  # its audio is out: the next turn may start, continuing it
            await session.send_words(synthesis.words.reached(pipeline.source_seconds_out), pipeline.stretch, offset)
        await session.send_audio(await asyncio.to_thread(pipeline.finish))
        await session.send_words(synthesis.words.remaining(), pipeline.stretch, offset)

    async def _start(self, synthesis: SegmentedSynthesis, ahead: Turn | None) -> str | None:
        """Starts the turn's first segment (continuing the connection's stream while its listener
        still plays); when it cannot, tells the client why and returns the request outcome
        ("rejected": overload, "invalid": nothing to speak)."""
        state = self.session.state
        continues = self.session.is_playing()
        # NOTE: linked only to the turn ahead's last segment, and only while the engine holds it;
        # otherwise the engine counts this one's playback from its own first audio, as for a new
        # speech (earlier, so on the safe side).
        follows = ahead.synthesis.last_request_id if continues and ahead is not None and ahead.synthesis else None
        try:
            state.drain.check()
            if not continues:
                state.early_refusal.check(state.engine.stats)
            with state.early_refusal.start(synthesis):
                await synthesis.start(continues, follows)
            return None
        except ShuttingDown as exc:
            await self.session.send_json(error_message("SHUTTING_DOWN", f"The turn's text was not spoken: {exc}"))
            return "unavailable"
        except RequestRejected as exc:
            overloaded = exc.code in ("overloaded", "queue_full")
            await self.session.send_json(error_message("TOO_MANY_REQUESTS" if overloaded else exc.code.upper(),
                                                       f"The turn's text was not spoken: {exc}"))
            return "rejected" if overloaded else "invalid"
        except NothingToSpeak as exc:
            await self.session.send_json(warning_message("NOTHING_TO_SPEAK", f"The turn's text was not spoken: {exc}"))
            return "invalid"


class SpeakSession:
    """One connection. Invariants: audio leaves in the order its text arrived; no audio of text
    sent before a Clear leaves after the Clear is read; every Flush is answered with Flushed (its
    `sequence_id` counts Flushes from 0) after the audio of the text before it, and every Clear
    with Cleared (counting Clears); when the connection ends, every engine request it opened is
    aborted."""

    def __init__(self, websocket: WebSocket, state, voice: str, choice: AudioChoice, speed: float,
                 timestamps: bool = False) -> None:
        self.websocket = websocket
        self.state = state
        self.voice = voice
        self.choice = choice
        self.speed = speed
        self.timestamps = timestamps
        self.samples_sent = 0
        # When the listener runs out of the audio sent so far, playing it in real time from its
        # first byte (and from each byte sent after it ran dry): the earliest it can be done.
        self._plays_until = 0.0
        self.text = TextStream(max_words=state.settings.first_segment_max_words)
        self.turn: Turn | None = None  # the turn text goes to
        self.last: asyncio.Task | None = None  # the newest turn's task (or Flushed): the next one sends after it
        self.last_turn: Turn | None = None  # the newest turn: the next one starts once it speaks
        self.tasks: set[asyncio.Task] = set()
        self.flushes = 0
        self.clears = 0
        self.cancel_reason = "cleared"  # what a cancelled turn counts as (the session's end: disconnected)
        self._send_lock = asyncio.Lock()
        self._task: asyncio.Task | None = None  # the one running `run`
        self.dropped = False

    async def run(self) -> None:
        self._task = asyncio.current_task()
        try:
            while True:
                message = await self.websocket.receive()
                if message["type"] == "websocket.disconnect":
                    return
                if message.get("text") is None:
                    await self.send_json(warning_message("BINARY_IGNORED", "Send JSON text messages (Speak, Flush, Clear, Close)"))
                    continue
                if not await self.on_message(message["text"]):
                    return
        except WebSocketDisconnect:
            return
        finally:
            self.cancel_reason = "disconnected"
            self.cancel_all()

    async def on_message(self, raw: str) -> bool:
        """Handles one client message; False once the session is over (Close)."""
        try:
            message = json.loads(raw)
            kind = message.get("type")
        except (ValueError, AttributeError):
            await self.send_json(warning_message("INVALID_MESSAGE", "Messages are JSON objects with a 'type'"))
            return True
        if kind == "Speak":
            await self.speak(message.get("text"))
        elif kind == "Flush":
            self.flush(self.flushes)
            self.flushes += 1
        elif kind == "Clear":
            self.clear()
            await self.send_json({"type": "Cleared", "sequence_id": self.clears})
            self.clears += 1
        elif kind == "Close":
            self.flush(None)
            if self.last is not None:
                await asyncio.wait([self.last])
            await self.websocket.close(1000)
            return False
        else:
            await self.send_json(warning_message("UNKNOWN_MESSAGE_TYPE", f"Unknown message type {kind!r}; "
                                                 "expected Speak, Flush, Clear or Close"))
        return True

    async def speak(self, text) -> None:
        if not isinstance(text, str):
            await self.send_json(warning_message("INVALID_TEXT", "A Speak message's 'text' must be a string"))
            return
        segments = self.text.add(text)
        if len(self.text.buffered) > MAX_INPUT_CHARS:
            self.text.clear()
            await self.send_json(error_message("TEXT_TOO_LONG", f"Over {MAX_INPUT_CHARS} characters without a "
                                               "sentence, clause or word boundary; the buffered text was dropped"))
        if segments:
            self._current_turn().extend(segments)

    def flush(self, flush_id: int | None) -> None:
        """Ends the current turn with whatever is buffered; Flushed `flush_id` (unless None)
        follows its audio (or, with no turn, the audio already on its way)."""
        rest = self.text.flush()
        if rest is not None:
            self._current_turn().extend([rest])
        if self.turn is not None:
            self.turn.finish(flush_id)
            self.turn = None
        elif flush_id is not None:
            self.last = self._track(asyncio.create_task(self._flushed_after(self.last, flush_id)))

    def drop(self, reason: str) -> None:
        """Ends the session without a word: the client is not reading, so nothing could reach it."""
        logger.info("speak socket dropped: %s", reason)
        self.dropped = True
        if self._task is not None:
            self._task.cancel()

    def clear(self) -> None:
        self.text.clear()
        self.cancel_all()
        self._plays_until = 0.0  # the client drops the audio it holds: nothing plays on

    def cancel_all(self) -> None:
        for task in self.tasks:
            task.cancel()
        self.turn, self.last, self.last_turn = None, None, None

    @property
    def seconds_sent(self) -> float:
        return self.samples_sent / self.choice.sample_rate

    def is_playing(self) -> bool:
        """Whether the listener may still be playing audio this connection sent."""
        return time.monotonic() < self._plays_until

    async def send_audio(self, data: bytes) -> None:
        if data:
            async with self._send_lock:
                # NOTE: counted first: a Clear may cancel the send once its frame is written.
                samples = len(data) // self.choice.sample_bytes
                self.samples_sent += samples
                self._plays_until = max(self._plays_until, time.monotonic()) + samples / self.choice.sample_rate
                await self.websocket.send_bytes(data)

    async def send_words(self, words: list[SpokenWord], stretch: float, offset: float) -> None:
        """A Timestamps message with `words` (model seconds) in the connection's audio time."""
        if self.timestamps and words:
            await self.send_json({"type": "Timestamps", "words": word_events(words, stretch, offset)})

    async def send_json(self, message: dict) -> None:
        if self.websocket.application_state is WebSocketState.CONNECTED:
            async with self._send_lock:
                await self.websocket.send_text(json.dumps(message))

    def _current_turn(self) -> Turn:
        if self.turn is None:
            self.turn = Turn(self, self.last_turn, self.last)
            self.last_turn = self.turn
            self.last = self._track(self.turn.task)
        return self.turn

    def _track(self, task: asyncio.Task) -> asyncio.Task:
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    async def _flushed_after(self, previous: asyncio.Task | None, flush_id: int) -> None:
        if previous is not None:
            await asyncio.wait([previous])
        await self.send_json({"type": "Flushed", "sequence_id": flush_id})

