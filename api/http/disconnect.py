"""Noticing an HTTP client that leaves before its response has started."""
from __future__ import annotations

import asyncio
from typing import Awaitable, TypeVar

from starlette.requests import Request

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
