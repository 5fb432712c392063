"""The voice library's routes: upload a clip to make a voice, read one, delete one (the list is
GET /v1/audio/voices, api/openai/catalog_routes.py). Thin: the rules live in api/voices/library.py."""
from __future__ import annotations

from fastapi import APIRouter, File, Form, Request, UploadFile
from fastapi.responses import JSONResponse

from api.http.auth import request_owner
from api.http.parsed_body import ParsedBodyRoute
from api.openai.errors import ApiError
from api.voices.library import VoiceLibrary, VoiceRefused

router = APIRouter(route_class=ParsedBodyRoute)
VOICES = "/v1/audio/voices"

_ERRORS = {status: {"description": text, "content": {"application/json": {}}} for status, text in {
    400: "A field is wrong (the error's `param` names it): the clip, its transcript, the name",
    401: "Missing or wrong API key",
    404: "No such voice for this key, or the voice library is off",
    409: "This key already has a voice of that name",
    413: "The upload is larger than the server takes",
    429: "This key holds as many voices as it may, or too many uploads are in progress (Retry-After)",
}.items()}


@router.post(VOICES, status_code=201, responses=_ERRORS)
async def create_voice(
    request: Request,
    name: str = Form(..., description="the voice's name, 1-64 characters, unique per API key"),
    audio: UploadFile | None = File(None, description="1-30 s of one speaker, in any format FFmpeg decodes"),
    audio_sample: UploadFile | None = File(None, description="the same, under the name OpenAI's API gives it"),
    transcript: str | None = Form(None, description="the clip's words: in-context cloning (closer to the clip)"),
    language: str | None = Form(None, description="the language the voice speaks when a request names none"),
    description: str | None = Form(None),
    consent: str | None = Form(None, max_length=256, description="OpenAI's consent recording id: kept with the voice"),
    type: str = Form("audio_sample", description="OpenAI's creation method: only audio_sample"),
) -> JSONResponse:
    """Clones a voice from a clip: the model's encoders run once, here, and what they make is
    stored; then `voice` = its id (or name) on every route speaks in it. Takes OpenAI's form too
    (`audio_sample`, `consent`, `type`), as its client sends it."""
    library = _library(request)
    if type != "audio_sample":
        raise ApiError(400, f"type must be 'audio_sample' (a voice from a clip); got '{type}'", "invalid_value", "type")
    if (audio is None) == (audio_sample is None):
        raise ApiError(400, "Send the clip as one file field, `audio` (or OpenAI's `audio_sample`)", "invalid_value",
                       "audio")
    data = await (audio or audio_sample).read()  # type: ignore[union-attr]
    try:
        voice = await library.create(request_owner(request.state), name, data, transcript, language, description,
                                     consent)
    except VoiceRefused as exc:
        raise _api_error(exc) from exc
    return JSONResponse(voice.public(), status_code=201)


@router.get(VOICES + "/{voice_id}", responses=_ERRORS)
async def get_voice(voice_id: str, request: Request) -> dict:
    try:
        return _library(request).get(request_owner(request.state), voice_id).public()
    except VoiceRefused as exc:
        raise _api_error(exc) from exc


@router.delete(VOICES + "/{voice_id}", responses=_ERRORS)
async def delete_voice(voice_id: str, request: Request) -> dict:
    """Requests already speaking in the voice finish; new ones get a 404."""
    try:
        voice = await _library(request).delete(request_owner(request.state), voice_id)
    except VoiceRefused as exc:
        raise _api_error(exc) from exc
    return {"id": voice.id, "object": "audio.voice.deleted", "deleted": True}


def _library(request: Request) -> VoiceLibrary:
    library = request.app.state.catalog.library
    if library is None:
        raise ApiError(404, "This server keeps no voice library (start it with --voices-dir)", "not_found")
    return library


def _api_error(exc: VoiceRefused) -> ApiError:
    return ApiError(exc.status, exc.message, exc.code, exc.param)
