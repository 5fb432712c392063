"""POST /v1/audio/speech: validate, plan, start the engine requests, stream encoded audio."""
from __future__ import annotations

import time
from typing import AsyncIterator

from fastapi import APIRouter, Request, Response
from fastapi.responses import StreamingResponse
from sse_starlette import EventSourceResponse

from api.http.auth import request_owner
from api.http.disconnect import CLIENT_CLOSED_REQUEST, ClientGone, unless_client_leaves
from api.http.parsed_body import ParsedBodyRoute
from api.openai import sse
from api.openai.errors import ApiError
from api.openai.schemas import SpeechRequest
from api.speech.audio.encoders import MEDIA_TYPES, default_rate, supported_rates
from api.speech.audio.pipeline import AudioPipeline
from api.speech.errors import STREAM_FAILURES, SpeechError, outcome_of
from api.speech.markup import pronunciations_in_force
from api.speech.start import check_ready, start_speech
from api.speech.streaming import encoded_audio
from api.speech.synthesis import SegmentedSynthesis
from api.speech.word_timeline import word_events

router = APIRouter(route_class=ParsedBodyRoute)

_ERROR_RESPONSES = {
    status: {"description": description, "content": {"application/json": {}}}
    for status, description in {
        400: "Invalid parameter (the error's `param` names it)",
        401: "Missing or wrong API key",
        404: "Unknown model or voice",
        413: "Request body too large",
        429: "The engine is at its real-time capacity, or its waiting queue is full (see Retry-After)",
        503: "The engine is not ready",
    }.items()
}
_AUDIO_RESPONSE = {
    200: {
        "description": "The audio, streamed as it is generated (or server-sent events)",
        "content": {**{media: {} for media in MEDIA_TYPES.values()}, "text/event-stream": {}},
    }
}


@router.post("/v1/audio/speech", response_class=StreamingResponse, responses={**_AUDIO_RESPONSE, **_ERROR_RESPONSES})
async def create_speech(body: SpeechRequest, request: Request):
    state = request.app.state
    arrived = time.monotonic()
    try:
        synthesis, pipeline = await unless_client_leaves(request, _start(body, state, request_owner(request.state)))
    except ApiError as exc:
        state.metrics.count_request(outcome_of(exc.status))
        raise
    except ClientGone:
        state.metrics.count_request("disconnected")
        return Response(status_code=CLIENT_CLOSED_REQUEST)
    audio = encoded_audio(synthesis, pipeline, state.metrics, arrived)
    if body.stream_format == "sse":
        # NOTE: sse-starlette cancels its streams when the server begins to exit; the drain
        # (api/http/draining.py) has already let them finish or ended them with an error by then.
        return EventSourceResponse(_events(audio, synthesis, pipeline if body.timestamps == "word" else None),
                                   headers={"Cache-Control": "no-cache"})
    return StreamingResponse(audio, media_type=MEDIA_TYPES[body.response_format], headers={"Cache-Control": "no-cache"})


async def _start(body: SpeechRequest, state, owner: str | None) -> tuple[SegmentedSynthesis, AudioPipeline]:
    try:
        check_ready(state.engine)
        state.catalog.resolve_model(body.model)
        voice = state.catalog.voice_choice(body.voice_name, body.language, body.instructions, owner=owner,
                                           normalize=body.normalize)
        if body.timestamps == "word" and body.stream_format != "sse":
            raise ApiError(400, "timestamps 'word' needs stream_format 'sse' (the timestamps are events beside "
                           "the audio)", "invalid_value", "timestamps")
        state.catalog.asks_word_timestamps(body.timestamps)
        rate = body.sample_rate or default_rate(body.response_format, state.settings.default_sample_rate)
        rates = supported_rates(body.response_format)
        if rates is not None and rate not in rates:
            raise ApiError(
                400, f"response_format '{body.response_format}' supports sample_rate {', '.join(map(str, rates))}; "
                f"got {rate}", "invalid_value", "sample_rate",
            )
        pronunciations = None if body.pronunciations is None else [
            entry.model_dump(exclude_none=True) for entry in body.pronunciations]
        lexicon = pronunciations_in_force(state.lexicon, pronunciations, state.engine.frontend)
        synthesis, model_speed = await start_speech(state, body.input, voice, body.speed, body.seed, lexicon=lexicon)
    except SpeechError as exc:
        raise ApiError.of(exc) from exc
    return synthesis, AudioPipeline(body.response_format, state.engine.sample_rate, rate, body.speed / model_speed)


async def _events(audio: AsyncIterator[bytes], synthesis: SegmentedSynthesis,
                  timed: AudioPipeline | None) -> AsyncIterator[dict]:
    """OpenAI's events; with the pipeline `timed` (timestamps asked for), each delta is followed
    by the words whose audio it starts."""
    try:
        async for data in audio:
            yield sse.audio_delta(data)
            if timed is not None and (words := synthesis.words.reached(timed.source_seconds_out)):
                yield sse.audio_timestamps(word_events(words, timed.stretch))
    except STREAM_FAILURES as exc:
        yield sse.stream_error(str(exc))
        return
    if timed is not None and (words := synthesis.words.remaining()):
        yield sse.audio_timestamps(word_events(words, timed.stretch))
    yield sse.audio_done(synthesis.usage.as_dict())
