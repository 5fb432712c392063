"""A bound on uploads in progress: the routes that take large bodies (a voice clip, up to 16 MiB)
hold one slot of the server's and one of their key's from before the body is read until the
response has been sent, and a request that finds none free is refused at once with 429. Without
it, clients that each hold one slow upload open hold that many bodies in memory (40 held uploads
of 16 MiB: the API process 351 → 970 MB).

When the last upload in progress ends, the heap's free pages are given back to the system
(api/http/heap.py): a body of megabytes, once freed, otherwise stays resident.
"""
from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Collection

from starlette.types import ASGIApp, Receive, Scope, Send

from api.http.error_shape import refusal
from api.http.heap import give_back_memory

RETRY_AFTER_SECONDS = 1


class UploadSlots:
    """Uploads in progress. Invariant: at most `total` are in progress, and at most `per_owner`
    of any one owner (a key's digest, api/http/auth.py); requests of no owner (a server without
    keys) are bounded by `total` alone. A slot is taken only by `take` and given back exactly
    once by `give_back`."""

    def __init__(self, total: int, per_owner: int) -> None:
        if total < 1 or per_owner < 1:
            raise ValueError("the upload slots, in all and per key, must be >= 1")
        self.total = total
        self.per_owner = per_owner
        self._owners: Counter[str | None] = Counter()

    @property
    def in_progress(self) -> int:
        return sum(self._owners.values())

    def take(self, owner: str | None) -> str | None:
        """Takes a slot for `owner`; returns None when taken, else why none is free."""
        if self.in_progress >= self.total:
            return f"{self.total} uploads are in progress on this server; retry shortly"
        if owner is not None and self._owners[owner] >= self.per_owner:
            return f"this key has {self.per_owner} uploads in progress; wait for one to finish"
        self._owners[owner] += 1
        return None

    def give_back(self, owner: str | None) -> None:
        if self._owners[owner] < 1:
            raise RuntimeError("an upload slot given back that was not taken")
        self._owners[owner] -= 1
        if not self._owners[owner]:
            del self._owners[owner]


class UploadSlotsMiddleware:
    """Runs after the key check (which sets the request's owner) and before the body is read:
    a request to one of `routes` (method, path) takes a slot of `slots` for as long as it runs,
    or is answered 429 (in its route's error shape, with Retry-After) without a byte of its body
    read. Invariant: every slot taken here is given back when the request ends, however it ends."""

    def __init__(self, app: ASGIApp, slots: UploadSlots, routes: Collection[tuple[str, str]]) -> None:
        self.app = app
        self.slots = slots
        self.routes = frozenset(routes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or (scope["method"], scope["path"]) not in self.routes:
            await self.app(scope, receive, send)
            return
        owner = scope.get("state", {}).get("owner")
        if (busy := self.slots.take(owner)) is not None:
            response = refusal(scope["path"], 429, f"Too many uploads: {busy}", "too_many_uploads",
                               "TOO_MANY_REQUESTS", headers={"Retry-After": str(RETRY_AFTER_SECONDS)})
            await response(scope, receive, send)
            return
        try:
            await self.app(scope, receive, send)
        finally:
            self.slots.give_back(owner)
            if not self.slots.in_progress:  # on a thread, not awaited: the response has been sent
                asyncio.get_running_loop().run_in_executor(None, give_back_memory)
