"""The server's own status, for probes and scrapers whatever protocol its clients speak: liveness,
readiness, Prometheus metrics."""
from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST

from api.http.supervisor import api_restarts

router = APIRouter()


@router.get("/health")
async def health(request: Request) -> JSONResponse:
    """The process is alive and its engine core is not dead (503 with the reason while a core
    that died is being restarted, and after the restarts were given up). Under `chorus serve`'s
    supervisor, `api_restarts` says how many times it started the API process again."""
    engine = request.app.state.engine
    restarts = api_restarts()
    supervised = {} if restarts is None else {"api_restarts": restarts}
    if engine.failure is not None:
        return JSONResponse({**_down(engine), **supervised}, status_code=503)
    return JSONResponse({"status": "ok", **supervised})


@router.get("/ready")
async def ready(request: Request) -> JSONResponse:
    """The model is loaded and the engine is stepping."""
    engine = request.app.state.engine
    if engine.failure is not None:
        return JSONResponse(_down(engine), status_code=503)
    if request.app.state.drain.draining:
        return JSONResponse({"status": "draining"}, status_code=503)
    if not engine.is_ready:
        return JSONResponse({"status": "starting"}, status_code=503)
    return JSONResponse({"status": "ready", "model": engine.frontend.model_name})


def _down(engine) -> dict:
    return {"status": engine.status, "reason": engine.failure, "restarts": engine.restarts}


@router.get("/metrics")
async def metrics(request: Request) -> Response:
    return Response(request.app.state.metrics.render(), media_type=CONTENT_TYPE_LATEST)
