"""POST /v1/speak: Deepgram's REST text-to-speech: `{"text": ...}` in, the audio streamed back."""
from __future__ import annotations

import math
import time
import uuid

from fastapi import APIRouter, Request, Response
from fastapi.responses import StreamingResponse

from api.deepgram.errors import DeepgramError
from api.deepgram.formats import DEFAULT_REST_ENCODING, REST_ENCODINGS, InvalidAudioQuery, audio_choice
from api.deepgram.voices import DEFAULT_MODEL, UnknownModel, deepgram_voice
from api.http.auth import request_owner
from api.http.disconnect import CLIENT_CLOSED_REQUEST, ClientGone, unless_client_leaves
from api.http.json_limits import InvalidJson
from api.http.parsed_body import ParsedBodyRoute
from api.http.quoting import quoted
from api.openai.schemas import MAX_INPUT_CHARS
from api.speech.audio.pipeline import AudioPipeline
from api.speech.errors import SpeechError, outcome_of
from api.speech.markup import pronunciations_in_force
from api.speech.start import check_ready, start_speech
from api.speech.streaming import encoded_audio

router = APIRouter(route_class=ParsedBodyRoute)
# Speed as OpenAI's route takes it (Deepgram documents 0.7-1.5; the wider range is a superset).
MIN_SPEED, MAX_SPEED = 0.25, 4.0


def model_uuid(model: str) -> str:
    """A stable id per model name (Deepgram's SDK reads one from every response)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"chorus:{model}"))


@router.post("/v1/speak", response_class=StreamingResponse)
async def speak(request: Request, model: str = DEFAULT_MODEL, encoding: str | None = None,
                container: str | None = None, sample_rate: str | None = None, speed: str | None = None,
                language: str | None = None, instructions: str | None = None, normalize: str | None = None):
    """Deepgram's speak: the text of the JSON body in the voice `model` names, in `encoding`
    (mp3 by default) within `container`, streamed as it is generated. Extensions: the `language`
    the text is read in, the `instructions` of a model that reads them, `normalize`, the body's
    `pronunciations` (as OpenAI's route takes them), and SSML text (`<speak>...`)."""
    state = request.app.state
    request_id = str(uuid.uuid4())
    arrived = time.monotonic()
    try:
        try:
            text, voice, choice, speed_value, lexicon = await _validated(request, state, model, encoding, container,
                                                                         sample_rate, speed, language, instructions,
                                                                         normalize)
            synthesis, model_speed = await unless_client_leaves(
                request, start_speech(state, text, voice, speed_value, lexicon=lexicon))
        except SpeechError as exc:
            raise DeepgramError.of(exc) from exc
    except DeepgramError as exc:
        state.metrics.count_request(outcome_of(exc.status))
        return exc.response(request_id)
    except ClientGone:
        state.metrics.count_request("disconnected")
        return Response(status_code=CLIENT_CLOSED_REQUEST)
    pipeline = AudioPipeline(choice.response_format, state.engine.sample_rate, choice.sample_rate,
                             speed_value / model_speed)
    # `model` is a header value only once deepgram_voice has taken it: one of the catalog's names
    # or an Aura id (lower-case letters and dashes); api/http/query_check.py refused any control or
    # non-Latin-1 character before the route ran.
    headers = {"dg-request-id": request_id, "dg-model-name": model, "dg-model-uuid": model_uuid(model),
               "dg-char-count": str(len(text)), "Cache-Control": "no-cache"}
    return StreamingResponse(encoded_audio(synthesis, pipeline, state.metrics, arrived),
                             media_type=choice.media_type, headers=headers)


async def _validated(request: Request, state, model: str, encoding, container, sample_rate, speed, language,
                     instructions, normalize):
    check_ready(state.engine)
    try:
        # Parsed within a nesting bound, off the event loop when large: by the body middleware for a
        # JSON type (api/http/body_limit.py), else here (api/http/parsed_body.py).
        body = await request.json()
    except InvalidJson as exc:
        raise DeepgramError(400, "INVALID_JSON", f"The body must be JSON, {{\"text\": \"...\"}}: {exc}") from None
    text = body.get("text") if isinstance(body, dict) else None
    if not isinstance(text, str) or not text.strip():
        raise DeepgramError(400, "INVALID_TEXT", "The body's 'text' must be a non-empty string")
    if len(text) > MAX_INPUT_CHARS:
        raise DeepgramError(413, "TEXT_TOO_LONG", f"The text has {len(text)} characters; at most {MAX_INPUT_CHARS}")
    try:
        owner = request_owner(request.state)
        voice = deepgram_voice(model, state.catalog, owner)
        choice = audio_choice(REST_ENCODINGS, encoding, container, sample_rate, DEFAULT_REST_ENCODING)
    except UnknownModel as exc:
        raise DeepgramError(400, "UNKNOWN_MODEL", str(exc)) from None
    except InvalidAudioQuery as exc:
        raise DeepgramError(400, "INVALID_QUERY_PARAMETER", str(exc)) from None
    voice_choice = state.catalog.voice_choice(voice, language, instructions, owner=owner,
                                              normalize=parse_flag("normalize", normalize))
    entries = body.get("pronunciations")
    if entries is not None and not isinstance(entries, list):
        raise DeepgramError(400, "INVALID_PRONUNCIATION", "The body's 'pronunciations' must be a list of "
                            "{\"word\", \"phonemes\" | \"say_as\"} objects")
    lexicon = pronunciations_in_force(state.lexicon, entries, state.engine.frontend)
    return text, voice_choice, choice, parse_speed(speed), lexicon


def parse_flag(name: str, value: str | None) -> bool | None:
    """A true/false query parameter (None when absent)."""
    if value is None:
        return None
    if value.lower() not in ("true", "false"):
        raise DeepgramError(400, "INVALID_QUERY_PARAMETER", f"{name} must be true or false; got {quoted(value)}")
    return value.lower() == "true"


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
