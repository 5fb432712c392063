"""What the server offers, as OpenAI's clients (and Open WebUI) list it: its models and voices."""
from __future__ import annotations

from fastapi import APIRouter, Request

from api.http.auth import request_owner

router = APIRouter()


@router.get("/v1/models")
async def list_models(request: Request) -> dict:
    """The served model, and the OpenAI names that are aliases of it (`root` says which)."""
    state = request.app.state
    catalog = state.catalog
    return {
        "object": "list",
        "data": [
            {"id": name, "object": "model", "created": state.started_at, "owned_by": "chorus", "root": catalog.model_name}
            for name in catalog.model_names
        ],
    }


@router.get("/v1/audio/voices")
async def list_voices(request: Request) -> dict:
    """Each model's voices, the OpenAI voice names that alias them, the languages it reads
    (`language`), whether it reads `instructions`, the timestamps it can send (`["word"]`, or
    none), whether it clones voices (`clones`) and the library's voices of the caller's key
    (`stored`); `voices` again as the flat `{"id", "name"}` list that Open WebUI reads (it
    fetches this route without a key, and then sees no key's voices)."""
    catalog = request.app.state.catalog
    stored = catalog.library.voices(request_owner(request.state)) if catalog.library is not None else []
    flat = [{"id": voice, "name": voice} for voice in catalog.voices]
    flat += [{"id": alias, "name": f"{alias} ({voice})"} for alias, voice in catalog.voice_aliases.items()]
    flat += [{"id": voice.id, "name": voice.name} for voice in stored]
    return {
        "object": "list",
        "data": [{"model": catalog.model_name, "voices": list(catalog.voices), "aliases": catalog.voice_aliases,
                  "languages": list(catalog.languages), "instructions": catalog.reads_instructions,
                  "timestamps": ["word"] if catalog.word_timestamps else [],
                  "clones": catalog.clones, "stored": [voice.public() for voice in stored]}],
        "voices": flat,
    }


@router.get("/v1/audio/models")
async def list_speech_models(request: Request) -> dict:
    """The speech models as Open WebUI reads them: `{"models": [{"id"}]}` (also fetched without a key)."""
    return {"models": [{"id": name} for name in request.app.state.catalog.model_names]}
