"""Work the event loop hands to a worker thread, unless it is known to cost less than the handoff."""
from __future__ import annotations

import asyncio
from typing import Any, Callable, TypeVar

T = TypeVar("T")


async def off_loop_unless(cheap: bool, function: Callable[..., T], *args: Any) -> T:
    """`function(*args)`: on the caller's thread (the event loop) when `cheap`, work bounded to
    less than a worker-thread handoff costs (about 0.1 ms of CPU on the 2-core machine), else on
    a worker thread, so that the loop, and with it every other stream, never waits on work whose
    cost grows with an input."""
    if cheap:
        return function(*args)
    return await asyncio.to_thread(function, *args)
