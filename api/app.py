"""The HTTP app: the engine's lifespan, the OpenAI-compatible routes, metrics and the web page."""
from __future__ import annotations

import asyncio
import gc
import logging
import time
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

from api.config.settings import ApiSettings
from api.deepgram import routes_rest as deepgram_rest
from api.deepgram import socket as deepgram_socket
from api.http import status_routes
from api.http.auth import ApiKeys, BearerKeyMiddleware
from api.http.body_limit import BodySizeLimitMiddleware
from api.http.flood_door import FloodDoorMiddleware
from api.http.draining import Drain
from api.http.heap import keep_large_blocks_mapped
from api.http.metrics import ApiMetrics
from api.http.query_check import QueryCheckMiddleware
from api.http.supervisor import EXIT_ENGINE_FAILED
from api.http.upload_slots import UploadSlots, UploadSlotsMiddleware
from api.openai import catalog_routes, speech_routes, voice_routes
from api.openai.errors import install_error_handlers
from api.speech.catalog import Catalog
from api.speech.early_refusal import EarlyRefusal
from api.speech.markup import server_lexicon
from api.speech.planning import SegmentPlanner
from api.speech.prompt_cache import PromptCache
from api.speech.prompt_pool import PromptPool
from api.voices.clip_decoder import ClipDecoders
from api.voices.library import LibraryLimits, VoiceLibrary
from engine.client import EngineClient
from engine.config import EngineConfig
from model.families.base import PromptFrontend

STATIC_DIR = Path(__file__).parent / "static"
logger = logging.getLogger("chorus.api")


def create_app(config: EngineConfig, settings: ApiSettings | None = None) -> FastAPI:
    settings = settings or ApiSettings()
    api_keys = ApiKeys(settings.api_keys)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        keep_large_blocks_mapped()  # an upload's body, freed, leaves the process (api/http/heap.py)
        client = EngineClient(config)
        app.state.engine = client
        app.state.catalog = Catalog(client.frontend, normalize_by_default=settings.normalize_text)
        app.state.api_keys = api_keys
        app.state.early_refusal = EarlyRefusal(admission_on=config.capacity.admission_on)
        app.state.drain = Drain()
        app.state.metrics = ApiMetrics(lambda: client.stats, lambda: app.state.early_refusal.refused,
                                       lambda: client.restarts)
        # Checked against the model before the engine starts: a bad file stops the server at once.
        app.state.lexicon = server_lexicon(settings.lexicon, client.frontend)
        await client.start()
        give_up = asyncio.create_task(_exit_when_the_engine_gives_up(app, client))
        try:
            async with PromptPool(client.frontend.prepare, settings.prompt_workers, app.state.metrics.prompts,
                                  prompt_cache(settings)) as pool, \
                    clip_decoders(settings, app.state.metrics) as decoders:
                # Token budgets and the splitting of long inputs follow the limits the engine enforces.
                app.state.planner = SegmentPlanner(pool, client.frontend, settings, client.limits)
                if settings.voices_dir is not None:
                    app.state.catalog.library = open_library(settings, client.frontend, pool, decoders)
                    await app.state.catalog.library.load_encoders()
                # NOTE: what starting made (the model's modules, tokenizers, tables: ~220,000
                # objects) lives as long as the process; frozen, the collector never scans it
                # again. Each full collection otherwise held the event loop ~125 ms (2-core machine).
                gc.freeze()
                yield
        finally:
            give_up.cancel()
            await client.close()

    # NOTE: FastAPI's /docs and /redoc pages load their JavaScript from a CDN (broken offline, and
    # an outside dependency of every page view): off unless asked for; /openapi.json stays.
    docs = {} if settings.enable_docs else {"docs_url": None, "redoc_url": None}
    app = FastAPI(title="Chorus", summary="OpenAI-compatible streaming speech synthesis", lifespan=lifespan, **docs)
    app.state.settings = settings
    app.state.started_at = int(time.time())
    install_error_handlers(app)
    app.include_router(status_routes.router)
    app.include_router(catalog_routes.router)
    app.include_router(speech_routes.router)
    app.include_router(voice_routes.router)
    app.include_router(deepgram_rest.router)
    app.include_router(deepgram_socket.router)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")

    @app.get("/", include_in_schema=False)
    async def web_page() -> FileResponse:
        return FileResponse(STATIC_DIR / "index.html")

    # The middleware added last runs first, and each of the first four looks at the request line
    # and headers alone: the query check refuses a malformed query string (HTTP and WebSocket);
    # auth checks the key on the protected routes; a new speech in a flood is refused
    # (api/http/flood_door.py); an upload takes one of the upload slots; only
    # then is a body read, within its route's limit (and a JSON one parsed, off the event loop
    # when large).
    uploads = {("POST", voice_routes.VOICES)}
    app.add_middleware(BodySizeLimitMiddleware, max_bytes=settings.max_body_bytes,
                       timeout_seconds=settings.body_timeout_seconds,
                       upload_limits=dict.fromkeys(uploads, settings.max_voice_upload_bytes))
    app.add_middleware(UploadSlotsMiddleware, routes=uploads,
                       slots=UploadSlots(settings.max_uploads_in_progress, settings.max_uploads_per_key))
    app.add_middleware(FloodDoorMiddleware, routes={("POST", "/v1/audio/speech"), ("POST", "/v1/speak")})
    app.add_middleware(BearerKeyMiddleware, api_keys=api_keys)
    app.add_middleware(QueryCheckMiddleware)
    return app


def prompt_cache(settings: ApiSettings) -> PromptCache | None:
    """The prompt pool's cache of prompts said again, within `prompt_cache_mb` (0: none)."""
    return PromptCache(int(settings.prompt_cache_mb * 2**20)) if settings.prompt_cache_mb > 0 else None


def clip_decoders(settings: ApiSettings, metrics: ApiMetrics) -> ClipDecoders:
    """The processes voice uploads are decoded in: none starts before the library's first upload."""
    return ClipDecoders(processes=settings.clip_decoders, memory_mb=settings.clip_decoder_memory_mb,
                        cpu_seconds=settings.clip_decoder_cpu_seconds,
                        timeout_seconds=settings.clip_decoder_timeout_seconds, failures=metrics.clip_decoder_failures)


def open_library(settings: ApiSettings, frontend: PromptFrontend, pool: PromptPool,
                 decoders: ClipDecoders) -> VoiceLibrary:
    """The voice library under `settings.voices_dir`: its voices load now (a corrupt one is
    logged and skipped), uploads are decoded by `decoders`, its encoders run on the prompt pool's
    threads."""
    limits = LibraryLimits(max_voices_per_owner=settings.max_voices_per_owner)
    library = VoiceLibrary.open(Path(settings.voices_dir).expanduser(), frontend, pool.run, limits, decoders)
    logger.info("voice library %s: %d voices (%d skipped)", settings.voices_dir, len(library),
                len(library.skipped))
    return library


async def _exit_when_the_engine_gives_up(app: FastAPI, client: EngineClient) -> None:
    """A core that keeps dying is beyond this process: `chorus serve` (which sets
    `app.state.request_shutdown`) shuts the server down and exits non-zero, for an outside
    supervisor to act on; embedded elsewhere, /health stays 503 with the reason."""
    await client.gave_up.wait()
    logger.critical("the engine core cannot be kept running: %s", client.failure)
    app.state.exit_code = EXIT_ENGINE_FAILED
    shutdown = getattr(app.state, "request_shutdown", None)
    if shutdown is not None:
        shutdown()
