"""Streaming a started speech encoded: the response body every HTTP speech route sends."""
from __future__ import annotations

import asyncio
import time
from typing import AsyncIterator

from api.speech.audio.pipeline import AudioPipeline
from api.speech.errors import STREAM_FAILURES
from api.speech.synthesis import SegmentedSynthesis


async def encoded_audio(synthesis: SegmentedSynthesis, pipeline: AudioPipeline, metrics,
                        arrived: float) -> AsyncIterator[bytes]:
    """A response body: the synthesis's audio through `pipeline`. Encoding runs on a worker
    thread so the event loop (and with it every other stream) never waits on a codec (but for
    short raw-PCM chunks: AudioPipeline.process_off_loop). Ends the synthesis however the body
    ends (a client that leaves aborts its engine requests)."""
    outcome = "disconnected"
    first = True
    try:
        async for pcm in synthesis.pcm():
            data = await pipeline.process_off_loop(pcm)
            if data:
                if first:
                    metrics.time_to_first_audio.observe(time.monotonic() - arrived)
                    first = False
                yield data
        tail = await asyncio.to_thread(pipeline.finish)
        if tail:
            yield tail
        outcome = "completed"
    except STREAM_FAILURES:
        outcome = "error"
        raise
    finally:
        # NOTE: no await here: after a disconnect the task is being cancelled and any await
        # would be cancelled again; cancelling the engine requests' tasks is enough to abort them.
        synthesis.close()
        metrics.count_request(outcome)
