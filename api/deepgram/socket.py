"""The /v1/speak WebSocket: Deepgram's streaming text-to-speech.

Text arrives in Speak messages of any size (single LLM tokens too). On a model that reads text
while it speaks (Qwen3-TTS; `live_text=false` opts out), a turn is one engine request fed word by
word (api/speech/live_text.py), and what cannot go into it (SSML, text beyond its room) follows it
as below. Otherwise text is cut into segments as sentences complete (api/speech/text_stream.py).
The segments up to a Flush make one turn: a live speech
(api/speech/planning.py) whose first segment starts as soon as it is cut, so speech begins before the
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
The `language` and `instructions` query parameters (extensions, as on the REST route) hold for
every turn. A Speak whose text is a whole SSML document (`<speak>...</speak>`, api/speech/markup.py)
joins the turn as its parts, after the text buffered before it; a Speak's `pronunciations`
(an extension: the entries OpenAI's route takes) hold for the rest of the connection.

Limits (api/config/settings.py), each answered in Deepgram's protocol; an Error leaves the connection
open and says what was dropped:
- A message over `socket_max_message_bytes` is dropped unparsed: Error MESSAGE_TOO_LARGE. One
  over `ws_max_size` (that and MESSAGE_SLACK_BYTES more) uvicorn closes the connection on (1009)
  before it has buffered all of it.
- A Speak over `socket_max_speak_chars` characters, or one that would take its turn (the text
  since the last Flush or Clear) over `socket_max_turn_chars`, is dropped: Error TEXT_TOO_LONG;
  the turn keeps the text it had.
- A Speak that would take its turn over the spoken budget (`max_spoken_chars`,
  `max_speech_seconds`, counted after SSML, pronunciations and normalization:
  api/speech/spoken_budget.py) is dropped: Error SPEECH_TOO_LONG.
- A Speak with a run of more than `max_word_chars` characters without whitespace (counting the
  word it continues) is dropped: Error WORD_TOO_LONG. So the text buffered until a boundary is
  bounded, and every Speak accepted is spoken whole.
- A connection idle for `socket_idle_seconds` (no client message, nothing sent, and the
  listener done playing what was) gets a Warning IDLE_TIMEOUT and is closed: 1000, with the
  reason. A turn left without its Flush keeps it open no longer than that.
- A send (audio or message) that the client has not taken within `socket_send_timeout_seconds`
  (it stopped reading) ends the session: close 1008 with the reason, tried for CLOSE_SECONDS,
  after which the connection is aborted (api/http/protocol.py). Backpressure's stalled
  client (api/speech/backpressure.py) is judged on the same clock and let go the same way.
- A long message is parsed, and its text cut, on a worker thread (INLINE_CHARS): no client
  holds the event loop, whatever it sends.
"""
from __future__ import annotations

import asyncio
import functools
import json
import logging
import time
import uuid

from fastapi import APIRouter, WebSocket
from starlette.websockets import WebSocketDisconnect, WebSocketState

from api.config.settings import ApiSettings
from api.deepgram.errors import DeepgramError, error_message, turn_refused, warning_message
from api.deepgram.formats import DEFAULT_SOCKET_ENCODING, SOCKET_ENCODINGS, AudioChoice, InvalidAudioQuery, audio_choice
from api.deepgram.routes_rest import model_uuid, parse_flag, parse_speed
from api.deepgram.voices import DEFAULT_MODEL, UnknownModel, deepgram_voice
from api.http.auth import ApiKeys
from api.http.json_limits import InvalidJson, loads_bounded
from api.http.quoting import quoted
from api.speech.audio.pipeline import AudioPipeline
from api.speech.errors import INVALID_PRONUNCIATION, INVALID_SSML, STREAM_FAILURES, SpeechError
from api.speech.live_text import LiveTextSegments
from api.speech.markup import pronunciations_in_force, speech_parts
from api.speech.off_loop import off_loop_unless
from api.speech.planning import PlannedText, SpeechSegments
from api.speech.spoken_budget import Spoken, SpeechTooLong
from api.speech.start import check_ready, start_synthesis
from api.speech.synthesis import SegmentedSynthesis
from api.speech.text_split import UncuttableText, check_runs
from api.speech.text_stream import TextStream
from api.speech.word_timeline import word_events
from api.speech.voice_choice import VoiceChoice
from model.families.base import SpokenWord
from model.text.lexicon import Lexicon
from model.text.ssml import is_ssml

logger = logging.getLogger("chorus.api")
router = APIRouter()
MODEL_VERSION = "chorus"
# A message of up to this many characters is parsed, and its text cut, on the event loop: both
# are linear, so that takes at most about half a millisecond (on the 2-core machine), and a
# token-by-token stream, whose messages are a few bytes each, pays no thread hop. A longer one
# goes to a worker thread.
INLINE_CHARS = 1024
# uvicorn closes the connection (1009) on a message this much over the socket's limit, before it
# has buffered all of it; one less far over is dropped with an Error, the connection kept.
MESSAGE_SLACK_BYTES = 64 * 1024
# How long the close that ends a session may wait to be sent: a client that stopped reading
# cannot take it, and its connection is aborted instead (api/http/protocol.py).
CLOSE_SECONDS = 2.0
NORMAL_CLOSURE, POLICY_VIOLATION = 1000, 1008


def ws_max_size(settings: ApiSettings) -> int:
    """uvicorn's `ws_max_size` for a server with these settings."""
    return settings.socket_max_message_bytes + MESSAGE_SLACK_BYTES


class Refused(Exception):
    """A client message, or the text of one, that is not acted on; `answer` (a Warning or an
    Error message) tells the client why."""

    def __init__(self, answer: dict) -> None:
        super().__init__(answer["description"])
        self.answer = answer


def parse_message(raw: str, max_bytes: int) -> dict:
    """A client message: a JSON object of at most `max_bytes` bytes of UTF-8 (refused unparsed
    when longer), nested no deeper than api/http/json_limits.py allows. Raises Refused."""
    if len(raw) > max_bytes or len(raw.encode("utf-8", "surrogatepass")) > max_bytes:
        raise Refused(error_message("MESSAGE_TOO_LARGE", f"A message may have at most {max_bytes} bytes; "
                                                         "this one was dropped unread"))
    try:
        message = loads_bounded(raw)
    except InvalidJson as exc:
        raise Refused(warning_message("INVALID_MESSAGE", f"Messages are JSON objects with a 'type': {exc}")) from None
    if not isinstance(message, dict):
        raise Refused(warning_message("INVALID_MESSAGE", "Messages are JSON objects with a 'type'"))
    return message


@router.websocket("/v1/speak")
async def speak_socket(websocket: WebSocket, model: str = DEFAULT_MODEL, encoding: str | None = None,
                       sample_rate: str | None = None, speed: str | None = None,
                       timestamps: str | None = None, language: str | None = None,
                       instructions: str | None = None, normalize: str | None = None,
                       live_text: str | None = None) -> None:
    state = websocket.app.state
    request_id = str(uuid.uuid4())
    subprotocol, owner = _authenticated(websocket, state.api_keys)
    try:
        if subprotocol is False:
            raise DeepgramError(401, "INVALID_AUTH", "Invalid credentials.")
        check_ready(state.engine)
        voice = state.catalog.voice_choice(deepgram_voice(model, state.catalog, owner), language, instructions,
                                           owner=owner, normalize=parse_flag("normalize", normalize))
        choice = audio_choice(SOCKET_ENCODINGS, encoding, None, sample_rate, DEFAULT_SOCKET_ENCODING)
        speed_value = parse_speed(speed)
        words = state.catalog.asks_word_timestamps(timestamps)
        live = parse_flag("live_text", live_text) is not False and state.engine.frontend.takes_live_text(voice.clone)
    except (UnknownModel, InvalidAudioQuery) as exc:
        code = "UNKNOWN_MODEL" if isinstance(exc, UnknownModel) else "INVALID_QUERY_PARAMETER"
        await websocket.send_denial_response(DeepgramError(400, code, str(exc)).response(request_id))
        return
    except SpeechError as exc:
        await websocket.send_denial_response(DeepgramError.of(exc).response(request_id))
        return
    except DeepgramError as exc:
        await websocket.send_denial_response(exc.response(request_id))
        return
    await websocket.accept(subprotocol=subprotocol or None)
    session = SpeakSession(websocket, state, voice, choice, speed_value, words, live)
    await session.serve({"type": "Metadata", "request_id": request_id, "model_name": model,
                         "model_version": MODEL_VERSION, "model_uuid": model_uuid(model)})


def _authenticated(websocket: WebSocket, keys: ApiKeys) -> tuple[str | bool, str | None]:
    """The subprotocol to accept with and the key's owner (api/http/auth.py): "" when no key is
    needed or the Authorization header has one, "token" when the `token` subprotocol does
    (browsers cannot set headers: `new WebSocket(url, ["token", KEY])`), False when neither."""
    if not keys:
        return "", None
    if (owner := keys.owner_of_header(websocket.headers.get("authorization"))) is not None:
        return "", owner
    protocols = websocket.scope.get("subprotocols") or []
    if len(protocols) >= 2 and protocols[0] == "token" and (owner := keys.owner(protocols[1])) is not None:
        return "token", owner
    return False, None


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
        planner = session.state.planner
        self.segments: SpeechSegments | LiveTextSegments
        if session.live_text:
            self.segments = LiveTextSegments(engine, planner, session.voice, self.model_speed, params,
                                             pronounce=session.pronounced)
        else:
            self.segments = planner.plan_live(session.voice, self.model_speed, params)
        self.flush_id: int | None = None
        self.ended = asyncio.Event()  # its Flush (or Close) has come: no more text
        self.sending = False  # its audio is going out (the turns before it are done)
        self.speaking = asyncio.Event()  # its audio has begun to go out, or it has ended
        self.synthesis: SegmentedSynthesis | None = None
        self.task = asyncio.create_task(self._run(ahead, previous))

    def extend(self, texts: list[str | PlannedText]) -> None:
        self.segments.extend(texts)

    @property
    def reads_live(self) -> bool:
        """Whether its text still goes into its running request word by word (`add_text`)."""
        return isinstance(self.segments, LiveTextSegments) and self.segments.live

    @property
    def open_word(self) -> str:
        """The word its live text ends in, while more of it may come ("" otherwise)."""
        return self.segments.open_word if isinstance(self.segments, LiveTextSegments) else ""

    def add_text(self, text: str) -> str:
        """Live text into its running request; returns what it had no room for (see LiveTextSegments)."""
        assert isinstance(self.segments, LiveTextSegments)
        return self.segments.add_text(text)

    def finish(self, flush_id: int | None) -> None:
        self.flush_id = flush_id
        self.segments.finish()
        self.ended.set()

    async def _run(self, ahead: Turn | None, previous: asyncio.Task | None) -> None:
        """The turn's audio after the turn before it, then its Flushed: also when its synthesis
        failed (the client is told with an Error), so that a Flush is always answered."""
        session, state = self.session, self.session.state
        # NOTE: stalled on the send timeout's clock: backpressure's paused request whose audio
        # nobody takes and a send that does not complete are one client that stopped reading.
        synthesis = self.synthesis = SegmentedSynthesis(
            state.engine, self.segments, session.voice.name, self.model_speed, state.settings.client_backlog_seconds,
            session.send_timeout, on_stall=self._stalled, pause_stretch=session.speed / self.model_speed)
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
            except STREAM_FAILURES as exc:
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
            # NOTE: the turn ends once its engine requests are aborted, so that whoever waits
            # for it (a Clear's answer) knows the engine has been told to stop them.
            await synthesis.wait_closed()

    def _stalled(self) -> bool:
        """Backpressure gave up waiting: a turn whose audio is going out has a client that
        stopped reading, and the session is dropped as for a send that timed out (a turn still
        waiting for the one before it only has to wait)."""
        if self.sending:
            self.session.drop(f"the client took no audio for {self.session.send_timeout:g} s")
        return self.sending

    async def _send_audio(self, synthesis: SegmentedSynthesis) -> None:
        self.sending = True
        session = self.session
        pipeline = AudioPipeline(session.choice.response_format, session.state.engine.sample_rate,
                                 session.choice.sample_rate, session.speed / self.model_speed)
        offset = session.seconds_sent  # where this turn's audio begins in the connection's
        async for pcm in synthesis.pcm():
            await session.send_audio(await pipeline.process_off_loop(pcm))
            if session.is_playing():
                self.speaking.set()  # its audio is out: the next turn may start, continuing it
            await session.send_words(synthesis.words.reached(pipeline.source_seconds_out), pipeline.stretch, offset)
        await session.send_audio(await asyncio.to_thread(pipeline.finish))
        await session.send_words(synthesis.words.remaining(), pipeline.stretch, offset)

    async def _start(self, synthesis: SegmentedSynthesis, ahead: Turn | None) -> str | None:
        """Starts the turn's first segment (continuing the connection's stream while its listener
        still plays); when it cannot, tells the client why and returns the request outcome
        ("rejected": overload, "invalid": nothing to speak)."""
        continuation = self.session.is_playing()
        # NOTE: linked only to the turn ahead's last segment, and only while the engine holds it;
        # otherwise the engine counts this one's playback from its own first audio, as for a new
        # speech (earlier, so on the safe side).
        follows = ahead.synthesis.last_request_id if continuation and ahead is not None and ahead.synthesis else None
        try:
            await start_synthesis(self.session.state, synthesis, continuation, follows)
            return None
        except SpeechError as exc:
            answer, outcome = turn_refused(exc)
            await self.session.send_json(answer)
            return outcome


class SpeakSession:
    """One connection. Invariants: audio leaves in the order its text arrived; no audio of text
    sent before a Clear leaves after the Clear is read; every Flush is answered with Flushed (its
    `sequence_id` counts Flushes from 0) after the audio of the text before it, and every Clear
    with Cleared (counting Clears) once the engine requests of the turns it dropped are aborted;
    a Speak is spoken whole or, refused, not at all, and a turn's text is at most
    `socket_max_turn_chars`; every send completes within the send timeout, or the session ends; a
    session that ends for a reason of its own (`ending`: Close, idle, dropped) closes the
    connection with its code and reason, tried for CLOSE_SECONDS; when the connection ends, every
    engine request it opened is aborted."""

    def __init__(self, websocket: WebSocket, state, voice: VoiceChoice, choice: AudioChoice, speed: float,
                 timestamps: bool = False, live_text: bool = False) -> None:
        self.websocket = websocket
        # Each turn is one engine request that reads its words as they come (api/speech/live_text.py).
        self.live_text = live_text
        self.state = state
        self.settings: ApiSettings = state.settings
        self.voice = voice
        self.choice = choice
        self.speed = speed
        self.timestamps = timestamps
        self.send_timeout = self.settings.socket_send_timeout_seconds
        self.samples_sent = 0
        # When the listener runs out of the audio sent so far, playing it in real time from its
        # first byte (and from each byte sent after it ran dry): the earliest it can be done.
        self._plays_until = 0.0
        self._active_at = time.monotonic()  # the last client message or send
        self.text = TextStream(max_words=self.settings.first_segment_max_words)
        # The pronunciations in force: the server's lexicon, then each Speak's `pronunciations`.
        self.lexicon: Lexicon = state.lexicon
        self.turn_chars = 0  # the text of the turn so far (since the last Flush or Clear)
        self.turn_spoken = Spoken()  # what that text says, against the spoken budget
        self.turn: Turn | None = None  # the turn text goes to
        self.last: asyncio.Task | None = None  # the newest turn's task (or Flushed): the next one sends after it
        self.last_turn: Turn | None = None  # the newest turn: the next one starts once it speaks
        self.tasks: set[asyncio.Task] = set()
        self.flushes = 0
        self.clears = 0
        self.cancel_reason = "cleared"  # what a cancelled turn counts as (the session's end: disconnected)
        self._send_lock = asyncio.Lock()
        self._task: asyncio.Task | None = None  # the one running `serve`
        self.ending: tuple[int, str] | None = None  # the close code and reason, once the session ends
        self.dropped = False

    async def serve(self, metadata: dict) -> None:
        """Sends `metadata`, handles the client's messages until the session ends, then closes
        the connection as `ending` says (unless the client has gone)."""
        self._task = asyncio.current_task()
        try:
            await self.send_json(metadata)
            await self.run()
        except asyncio.CancelledError:
            if not self.dropped:
                raise  # the server is stopping: not ours to swallow
            # NOTE: our own cancel, taken back so that the close below can still await (on
            # Python 3.11+, whose timeouts count a task's pending cancellations).
            if hasattr(self._task, "uncancel"):
                self._task.uncancel()
        except WebSocketDisconnect:
            pass  # the Metadata did not go out
        if self.ending is not None:
            await self.close(*self.ending)

    async def run(self) -> None:
        try:
            while (message := await self.receive()) is not None:
                if message.get("text") is None:
                    await self.send_json(warning_message("BINARY_IGNORED", "Send JSON text messages (Speak, Flush, Clear, Close)"))
                elif not await self.on_message(message["text"]):
                    return
        except WebSocketDisconnect:
            return
        finally:
            self.cancel_reason = "disconnected"
            self.cancel_all()

    async def receive(self) -> dict | None:
        """The client's next message; None once it has gone, or once the connection has been
        idle for `socket_idle_seconds` (then the client is told, and `ending` says why)."""
        while True:
            try:
                message = await asyncio.wait_for(self.websocket.receive(), self._idle_left())
            except TimeoutError:
                if self._idle_left() > 0:
                    continue  # it was busy meanwhile
                idle = f"idle for {self.settings.socket_idle_seconds:g} s"
                await self.send_json(warning_message("IDLE_TIMEOUT", f"The connection was {idle} (no message, "
                                                     "nothing to send) and is closed; open a new one to speak again"))
                self.ending = (NORMAL_CLOSURE, idle)
                return None
            if message["type"] == "websocket.disconnect":
                return None
            self._active_at = time.monotonic()
            return message

    def _idle_left(self) -> float:
        """How long the connection may stay as it is before it is idle: `socket_idle_seconds`
        from the last client message or completed send, or from when the listener runs out of
        audio if that is later (a reply still playing is no idle connection); the whole of it
        while a send is under way. A turn that sends nothing (one whose audio is all out, waiting
        for its Flush) does not keep the connection open."""
        if self._send_lock.locked():
            return self.settings.socket_idle_seconds
        since = max(self._active_at, self._plays_until)
        return self.settings.socket_idle_seconds - (time.monotonic() - since)

    async def on_message(self, raw: str) -> bool:
        """Handles one client message; False once the session is over (Close)."""
        try:
            message = await _off_loop(len(raw), parse_message, raw, self.settings.socket_max_message_bytes)
        except Refused as exc:
            await self.send_json(exc.answer)
            return True
        kind = message.get("type")
        if kind == "Speak":
            if "pronunciations" in message and not await self.add_pronunciations(message["pronunciations"]):
                return True  # refused: the Speak's text is dropped with them
            await self.speak(message.get("text"))
        elif kind == "Flush":
            self.flush(self.flushes)
            self.flushes += 1
        elif kind == "Clear":
            await self.clear()
            await self.send_json({"type": "Cleared", "sequence_id": self.clears})
            self.clears += 1
        elif kind == "Close":
            self.flush(None)
            if self.last is not None:
                await asyncio.wait([self.last])
            self.ending = (NORMAL_CLOSURE, "")
            return False
        else:
            await self.send_json(warning_message("UNKNOWN_MESSAGE_TYPE", f"Unknown message type {quoted(kind)}; "
                                                 "expected Speak, Flush, Clear or Close"))
        return True

    async def add_pronunciations(self, entries) -> bool:
        """A Speak's `pronunciations`: the connection's from now on, over the server's lexicon and
        those given before (the newer win). False (and the client told) when refused."""
        try:
            if not isinstance(entries, list):
                raise SpeechError(400, INVALID_PRONUNCIATION, "A Speak message's 'pronunciations' must be a list "
                                  "of {\"word\", \"phonemes\" | \"say_as\"} objects")
            self.lexicon = pronunciations_in_force(self.lexicon, entries, self.state.engine.frontend)
        except SpeechError as exc:
            await self.send_json(error_message("INVALID_PRONUNCIATION", f"The Speak was dropped: {exc.message}"))
            return False
        return True

    async def speak(self, text) -> None:
        if not isinstance(text, str):
            await self.send_json(warning_message("INVALID_TEXT", "A Speak message's 'text' must be a string"))
            return
        try:
            self._check_length(text)
            if is_ssml(text):
                segments, spoken = await _off_loop(len(text), self._ssml_segments, text)
            else:
                spoken = await _off_loop(len(text), self._spoken_by, text)
                if self.live_text and (self.turn is None or self.turn.reads_live):
                    segments = await self._live(text)
                else:
                    segments = await _off_loop(len(text), self._cut, text)
        except Refused as exc:
            await self.send_json(exc.answer)
            return
        self.turn_chars += len(text)
        self.turn_spoken = spoken
        if segments:
            self._current_turn().extend(segments)

    async def _live(self, text: str) -> list[str]:
        """A Speak's text into the turn's running request (a model that reads live text); the
        segments of what it had no room for, cut as any other turn's text."""
        open_word = self.turn.open_word if self.turn is not None else ""
        check = functools.partial(check_runs, open_word + text, self.settings.max_word_chars)
        try:
            await _off_loop(len(text), check)
        except UncuttableText as exc:
            raise Refused(error_message("WORD_TOO_LONG", f"The Speak's text was dropped: {exc}")) from None
        if not text.strip() and self.turn is None:
            return []  # whitespace before a turn's first word says nothing: no turn for it
        overflow = self._current_turn().add_text(text)
        return await _off_loop(len(overflow), self._cut, overflow) if overflow else []

    def _ssml_segments(self, document: str) -> tuple[list[str | PlannedText], Spoken]:
        """An SSML Speak (a whole `<speak>` document): the text buffered before it, then its own
        parts' segments (api/speech/markup.py), in the turn it joins; and what the turn then says."""
        frontend = self.state.engine.frontend
        planner = self.state.planner
        try:
            parts = speech_parts(document, frontend, self.lexicon, frontend.model_speed(self.speed))
            spoken = planner.spoken_budget.check(parts, self.speed, before=self.turn_spoken)
            planned = planner.planned_texts(parts)
        except SpeechError as exc:  # invalid SSML, or phonemes the model cannot say
            code = "INVALID_SSML" if exc.code == INVALID_SSML else "INVALID_TEXT"
            raise Refused(error_message(code, f"The Speak was dropped: {exc.message}")) from None
        except SpeechTooLong as exc:
            raise Refused(error_message("SPEECH_TOO_LONG", f"The Speak was dropped: {exc}")) from None
        except UncuttableText as exc:
            raise Refused(error_message("WORD_TOO_LONG", f"The Speak was dropped: {exc}")) from None
        rest = self.text.flush()
        return ([] if rest is None else self._pronounced([rest])) + planned, spoken

    def _spoken_by(self, text: str) -> Spoken:
        """What the turn says once a plain-text Speak's `text` joins it, its pronunciations applied;
        Refused when that is over the spoken budget (api/speech/spoken_budget.py)."""
        try:
            return self.state.planner.spoken_budget.check_texts(self._pronounced([text]), self.speed,
                                                                before=self.turn_spoken)
        except SpeechTooLong as exc:
            raise Refused(error_message("SPEECH_TOO_LONG", f"The Speak was dropped: {exc}")) from None

    def pronounced(self, text: str) -> str:
        """`text` (whole words) with the connection's pronunciations applied, as they stand now."""
        return self._pronounced([text])[0]

    def _pronounced(self, segments: list[str]) -> list[str]:
        """Plain-text segments with the connection's pronunciations applied (words are whole
        within a segment: the text stream cuts only between them)."""
        if not self.lexicon:
            return segments
        reads_phonemes = self.state.engine.frontend.reads_phonemes
        return [self.lexicon.apply(segment, phonemes=reads_phonemes) for segment in segments]

    def _check_length(self, text: str) -> None:
        """Refuses a Speak over the per-message or the per-turn limit."""
        settings = self.settings
        if len(text) > settings.socket_max_speak_chars:
            raise Refused(error_message("TEXT_TOO_LONG", f"A Speak may carry at most {settings.socket_max_speak_chars} "
                                        f"characters; this one has {len(text)}. Its text was dropped: send it in parts"))
        if self.turn_chars + len(text) > settings.socket_max_turn_chars:
            raise Refused(error_message("TEXT_TOO_LONG", f"A turn (the text up to a Flush) may hold at most "
                                        f"{settings.socket_max_turn_chars} characters; this Speak would make it "
                                        f"{self.turn_chars + len(text)}. Its text was dropped: Flush, then send it"))

    def _cut(self, text: str) -> list[str]:
        """The segments `text` completes, once its runs without whitespace (the first one
        continuing the word the buffer ends in) are found short enough to cut."""
        try:
            check_runs(self.text.open_word + text, self.settings.max_word_chars)
        except UncuttableText as exc:
            raise Refused(error_message("WORD_TOO_LONG", f"The Speak's text was dropped: {exc}")) from None
        return self._pronounced(self.text.add(text))

    def flush(self, flush_id: int | None) -> None:
        """Ends the current turn with whatever is buffered; Flushed `flush_id` (unless None)
        follows its audio (or, with no turn, the audio already on its way)."""
        rest = self.text.flush()
        self.turn_chars = 0
        self.turn_spoken = Spoken()
        if rest is not None:
            self._current_turn().extend(self._pronounced([rest]))
        if self.turn is not None:
            self.turn.finish(flush_id)
            self.turn = None
        elif flush_id is not None:
            self.last = self._track(asyncio.create_task(self._flushed_after(self.last, flush_id)))

    def drop(self, reason: str) -> None:
        """Ends the session: the client stopped reading, so nothing more can reach it but, if its
        buffers take it, the close (POLICY_VIOLATION, `reason`)."""
        if self.ending is not None:
            return  # already ending
        logger.info("speak socket dropped: %s", reason)
        self.dropped = True
        self.ending = (POLICY_VIOLATION, reason)
        # NOTE: not the task that is calling: its send raises WebSocketDisconnect, which ends it.
        if self._task is not None and self._task is not asyncio.current_task():
            self._task.cancel()

    async def clear(self) -> None:
        """Drops the text not yet spoken and the turns under way, and returns once their tasks
        have ended (their engine requests aborted)."""
        self.text.clear()
        self.turn_chars = 0
        self.turn_spoken = Spoken()
        cancelled = self.cancel_all()
        self._plays_until = 0.0  # the client drops the audio it holds: nothing plays on
        if cancelled:
            await asyncio.wait(cancelled)

    def cancel_all(self) -> list[asyncio.Task]:
        """Cancels every turn (and Flushed) under way; returns their tasks."""
        cancelled = list(self.tasks)
        for task in cancelled:
            task.cancel()
        self.turn, self.last, self.last_turn = None, None, None
        return cancelled

    @property
    def seconds_sent(self) -> float:
        return self.samples_sent / self.choice.sample_rate

    def is_playing(self) -> bool:
        """Whether the listener may still be playing audio this connection sent."""
        return time.monotonic() < self._plays_until

    async def send_audio(self, data: bytes) -> None:
        if data:
            # NOTE: counted first: a Clear may cancel the send once its frame is written.
            samples = len(data) // self.choice.sample_bytes
            self.samples_sent += samples
            self._plays_until = max(self._plays_until, time.monotonic()) + samples / self.choice.sample_rate
            await self._send(data)

    async def send_words(self, words: list[SpokenWord], stretch: float, offset: float) -> None:
        """A Timestamps message with `words` (model seconds) in the connection's audio time."""
        if self.timestamps and words:
            await self.send_json({"type": "Timestamps", "words": word_events(words, stretch, offset)})

    async def send_json(self, message: dict) -> None:
        if self.websocket.application_state is WebSocketState.CONNECTED:
            await self._send(json.dumps(message))

    async def _send(self, frame: str | bytes) -> None:
        """Sends one frame after those before it. One the client has not taken within the send
        timeout (the buffers in front of it full: it stopped reading) drops the session and
        raises WebSocketDisconnect, as a client that has gone does."""
        try:
            async with asyncio.timeout(self.send_timeout), self._send_lock:
                if isinstance(frame, bytes):
                    await self.websocket.send_bytes(frame)
                else:
                    await self.websocket.send_text(frame)
        except TimeoutError:
            self.drop(f"the client took nothing for {self.send_timeout:g} s")
            raise WebSocketDisconnect(POLICY_VIOLATION) from None
        self._active_at = time.monotonic()

    async def close(self, code: int, reason: str) -> None:
        """Closes the connection, if the client takes the close frame within CLOSE_SECONDS."""
        if self.websocket.application_state is not WebSocketState.CONNECTED:
            return
        try:
            async with asyncio.timeout(CLOSE_SECONDS), self._send_lock:
                await self.websocket.close(code, reason)
        except TimeoutError:
            logger.info("speak socket: the client took no close frame; its connection is reset shortly")
        except (WebSocketDisconnect, RuntimeError):
            pass  # the client has gone meanwhile

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
        try:
            await self.send_json({"type": "Flushed", "sequence_id": flush_id})
        except (WebSocketDisconnect, RuntimeError):
            pass  # the client has gone, or was dropped: the session ends


async def _off_loop(size: int, function, *args):
    """`function(*args)`, whose cost grows with `size` (characters of input): on the event loop
    up to INLINE_CHARS, else on a worker thread. Awaited by the one task that handles messages,
    so messages still take effect in order (a Clear drops all text sent before it)."""
    return await off_loop_unless(size <= INLINE_CHARS, function, *args)
