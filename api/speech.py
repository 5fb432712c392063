"""What every speech route shares: starting a speech's synthesis, and streaming it encoded."""
from __future__ import annotations

import asyncio
import math
import time
from typing import AsyncIterator, Awaitable, TypeVar

from starlette.requests import Request

from api.audio.pipeline import AudioPipeline
from api.synthesis import SegmentedSynthesis, SynthesisFailed
from engine.errors import EngineDeadError, RequestRejected


T = TypeVar("T")
# The status logged for a request whose client left before its response started (nginx's).
CLIENT_CLOSED_REQUEST = 499


class ClientGone(Exception):
    """The client disconnected before its response started."""


async def unless_client_leaves(request: Request, work: Awaitable[T]) -> T:
    """`work`'s result, unless the client disconnects first: then `work` is cancelled (a speech
    being started closes what it opened: queued prompt preparations are dropped, engine requests
    aborted) and ClientGone is raised. Without this a client that leaves is noticed only when
    its first audio is written, after its text was prepared and prefilled for no one."""
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_disconnect(request))
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)  # let it close what it opened
    if task.cancelled():
        raise ClientGone
    return task.result()


async def _disconnect(request: Request) -> None:
    """Returns when the client has gone (the request body has already been read)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


def retry_after_seconds(exc: RequestRejected, default: int) -> int:
    """The Retry-After of a refusal: the engine's own estimate when it has one (when its streams
    will have made room), rounded up to whole seconds, else `default`."""
    return default if exc.retry_after is None else max(1, math.ceil(exc.retry_after))


def outcome_of(status: int) -> str:
    """The `chorus_requests_total` outcome of a request answered with an error `status`."""
    return {429: "rejected", 503: "unavailable"}.get(status, "invalid" if status < 500 else "error")


async def start_speech(state, text: str, voice: str, speed: float, seed: int | None) -> tuple[SegmentedSynthesis, float]:
    """Plans `text` and starts its synthesis: returns it, with its first audio on the way, and the
    speed the model speaks at (the pipeline stretches the rest of `speed`). Raises ShuttingDown
    during a shutdown drain, UnspeakableText for a text that cannot be cut (or has nothing to
    speak), or what stopped its first segment (RequestRejected, VoiceNotFoundError,
    EngineDeadError);
    nothing is left running then. A full engine refuses it before its text is prepared
    (api/early_refusal.py); its first audio is due `max_queue_delay` after this call, its
    preparation included."""
    engine = state.engine
    arrived = time.monotonic()
    state.drain.check()
    state.early_refusal.check(engine.stats)
    # The model speaks as close to `speed` as its rate control reaches; the pipeline stretches the rest.
    model_speed = engine.frontend.model_speed(speed)
    params = engine.frontend.default_sampling().replace(seed=seed)
    segments = await state.planner.plan(text, voice, model_speed, params)
    settings = state.settings
    synthesis = SegmentedSynthesis(engine, segments, voice, model_speed, settings.client_backlog_seconds,
                                   settings.stalled_client_seconds)
    state.drain.register(synthesis)
    with state.early_refusal.start(synthesis):
        try:
            await synthesis.start(arrived=arrived)
        except BaseException:
            synthesis.close()
            raise
    return synthesis, model_speed


async def encoded_audio(synthesis: SegmentedSynthesis, pipeline: AudioPipeline, metrics,
                        arrived: float) -> AsyncIterator[bytes]:
    """A response body: the synthesis's audio through `pipeline`. Encoding runs on a worker
    thread so the event loop (and with it every other stream) never waits on a codec. Ends the
    synthesis however the body ends (a client that leaves aborts its engine requests)."""
    outcome = "disconnected"
    first = True
    try:
        async for pcm in synthesis.pcm():
            data = await asyncio.to_thread(pipeline.process, pcm)
            if data:
                if first:
                    metrics.time_to_first_audio.observe(time.monotonic() - arrived)
                    first = False
                yield data
        tail = await asyncio.to_thread(pipeline.finish)
        if tail:
            yield tail
        outcome = "completed"
    except (SynthesisFailed, EngineDeadError):
        outcome = "error"
        raise
    finally:
        # NOTE: no await here: after a disconnect the task is being cancelled and any await
        # would be cancelled again; cancelling the engine requests' tasks is enough to abort them.
        synthesis.close()
        metrics.count_request(outcome)
