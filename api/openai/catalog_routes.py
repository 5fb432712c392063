"""What the server offers, as OpenAI's clients (and Open WebUI) list it: its models and voices."""
from __future__ import annotations

from fastapi import APIRouter, Request

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
    (`language`), whether it reads `instructions` and the timestamps it can send (`["word"]`, or
    none); `voices` again as the flat `{"id", "name"}` list that Open WebUI reads (it fetches
    this route without a key)."""
    catalog = request.app.state.catalog
    flat = [{"id": voice, "name": voice} for voice in catalog.voices]
    flat += [{"id": alias, "name": f"{alias} ({voice})"} for alias, voice in catalog.voice_aliases.items()]
    return {
        "object": "list",
        "data": [{"model": catalog.model_name, "voices": list(catalog.voices), "aliases": catalog.voice_aliases,
                  "languages": list(catalog.languages), "instructions": catalog.reads_instructions,
                  "timestamps": ["word"] if catalog.word_timestamps else []}],
        "voices": flat,
    }


@router.get("/v1/audio/models")
async def list_speech_models(request: Request) -> dict:
    """The speech models as Open WebUI reads them: `{"models": [{"id"}]}` (also fetched without a key)."""
    return {"models": [{"id": name} for name in request.app.state.catalog.model_names]}
