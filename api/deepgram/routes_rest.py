"""POST /v1/speak: Deepgram's REST text-to-speech: `{"text": ...}` in, the audio streamed back."""
from __future__ import annotations

import math
import time
import uuid

from fastapi import APIRouter, Request, Response
from fastapi.responses import StreamingResponse

from api.audio.pipeline import AudioPipeline
from api.deepgram.errors import DeepgramError
from api.draining import DRAIN_RETRY_AFTER_SECONDS, ShuttingDown
from api.errors import quoted
from api.json_limits import InvalidJson, loads_bounded
from api.deepgram.formats import DEFAULT_REST_ENCODING, REST_ENCODINGS, InvalidAudioQuery, audio_choice
from api.deepgram.voices import DEFAULT_MODEL, UnknownModel, deepgram_voice
from api.schemas import MAX_INPUT_CHARS
from api.text_split import UnspeakableText
from api.speech import (CLIENT_CLOSED_REQUEST, ClientGone, encoded_audio, outcome_of, retry_after_seconds,
                        start_speech, unless_client_leaves)
from engine.errors import EngineDeadError, RequestRejected

router = APIRouter()
# Speed as OpenAI's route takes it (Deepgram documents 0.7-1.5; the wider range is a superset).
MIN_SPEED, MAX_SPEED = 0.25, 4.0


def model_uuid(model: str) -> str:
    """A stable id per model name (Deepgram's SDK reads one from every response)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"chorus:{model}"))


@router.post("/v1/speak", response_class=StreamingResponse)
async def speak(request: Request, model: str = DEFAULT_MODEL, encoding: str | None = None,
                container: str | None = None, sample_rate: str | None = None, speed: str | None = None):
    """Deepgram's speak: the text of the JSON body in the voice `model` names, in `encoding`
    (mp3 by default) within `container`, streamed as it is generated."""
    state = request.app.state
    request_id = str(uuid.uuid4())
    arrived = time.monotonic()
    try:
        text, voice, choice, speed_value = await _validated(request, state, model, encoding, container, sample_rate, speed)
        try:
            synthesis, model_speed = await unless_client_leaves(request, start_speech(state, text, voice, speed_value, None))
        except (RequestRejected, UnspeakableText, EngineDeadError, ShuttingDown) as exc:
            raise _as_deepgram_error(exc, state.settings.retry_after_seconds) from exc
    except DeepgramError as exc:
        state.metrics.count_request(outcome_of(exc.status))
        return exc.response(request_id)
    except ClientGone:
        state.metrics.count_request("disconnected")
        return Response(status_code=CLIENT_CLOSED_REQUEST)
    pipeline = AudioPipeline(choice.response_format, state.engine.sample_rate, choice.sample_rate,
                             speed_value / model_speed)
    # `model` is a header value only once deepgram_voice has taken it: one of the catalog's names
    # or an Aura id (lower-case letters and dashes); api/query_check.py refused any control or
    # non-Latin-1 character before the route ran.
    headers = {"dg-request-id": request_id, "dg-model-name": model, "dg-model-uuid": model_uuid(model),
               "dg-char-count": str(len(text)), "Cache-Control": "no-cache"}
    return StreamingResponse(encoded_audio(synthesis, pipeline, state.metrics, arrived),
                             media_type=choice.media_type, headers=headers)


async def _validated(request: Request, state, model: str, encoding, container, sample_rate, speed):
    if not state.engine.is_ready:
        raise DeepgramError(503, "ENGINE_NOT_READY", "The engine is not ready yet; retry shortly")
    try:
        # Bounded: a deeply nested body is a RecursionError to Python's parser (a 500). One of a
        # JSON type was already judged so (api/body_limit.py); this is for any other type.
        body = loads_bounded(await request.body())
    except InvalidJson as exc:
        raise DeepgramError(400, "INVALID_JSON", f"The body must be JSON, {{\"text\": \"...\"}}: {exc}") from None
    text = body.get("text") if isinstance(body, dict) else None
    if not isinstance(text, str) or not text.strip():
        raise DeepgramError(400, "INVALID_TEXT", "The body's 'text' must be a non-empty string")
    if len(text) > MAX_INPUT_CHARS:
        raise DeepgramError(413, "TEXT_TOO_LONG", f"The text has {len(text)} characters; at most {MAX_INPUT_CHARS}")
    try:
        voice = deepgram_voice(model, state.catalog)
        choice = audio_choice(REST_ENCODINGS, encoding, container, sample_rate, DEFAULT_REST_ENCODING)
    except UnknownModel as exc:
        raise DeepgramError(400, "UNKNOWN_MODEL", str(exc)) from None
    except InvalidAudioQuery as exc:
        raise DeepgramError(400, "INVALID_QUERY_PARAMETER", str(exc)) from None
    return text, voice, choice, parse_speed(speed)


def parse_speed(speed: str | None) -> float:
    if speed is None:
        return 1.0
    try:
        value = float(speed)
    except ValueError:
        value = math.nan
    if not MIN_SPEED <= value <= MAX_SPEED:
        raise DeepgramError(400, "INVALID_QUERY_PARAMETER", f"speed must be a number in [{MIN_SPEED}, {MAX_SPEED}]; got {quoted(speed)}")
    return value


def _as_deepgram_error(exc: Exception, retry_after: int) -> DeepgramError:
    if isinstance(exc, RequestRejected) and exc.code in ("overloaded", "queue_full"):
        seconds = retry_after_seconds(exc, retry_after)
        return DeepgramError(429, "TOO_MANY_REQUESTS", f"The server is busy: {exc}", {"Retry-After": str(seconds)})
    if isinstance(exc, EngineDeadError):
        return DeepgramError(503, "ENGINE_DEAD", "The engine has stopped; see the server log")
    if isinstance(exc, ShuttingDown):
        return DeepgramError(503, "SHUTTING_DOWN", str(exc), {"Retry-After": str(DRAIN_RETRY_AFTER_SECONDS)})
    return DeepgramError(400, "INVALID_TEXT", f"The text cannot be spoken: {exc}")


