"""Request bodies parsed once, off the event loop.

The body middleware (api/http/body_limit.py) reads a body whole, within its route's limit,
before the route runs, and parses a JSON body there (on a worker thread when it is large; see
`INLINE_JSON_BYTES`) to refuse one that is not JSON. A route built with `ParsedBodyRoute` is
handed a `ParsedBodyRequest`, whose `json()` returns that parse instead of parsing the body again
on the event loop, and whose `form()` parses a multipart body on a worker thread
(api/http/multipart_form.py) instead of on the event loop as Starlette does. This is FastAPI's
documented way to change how a route reads its request ("Custom Request and APIRoute class").
"""
from __future__ import annotations

import asyncio
from typing import Any, Callable, Coroutine

from fastapi import Request, Response
from fastapi.routing import APIRoute
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException

from api.http.json_limits import loads_bounded
from api.http.multipart_form import FormRefused, parse_multipart

# Where the body middleware leaves a JSON body's parse in the request's scope.
PARSED_JSON = "chorus.parsed_json"
# A JSON body up to this size is parsed on the event loop (at most ~60 us on the 2-core machine,
# less than handing it to a thread costs in latency); a larger one, up to the body limit (64 KiB:
# ~1.2 ms), on a worker thread.
INLINE_JSON_BYTES = 4096


class ParsedBodyRequest(Request):
    """A request whose body's parse comes from off the event loop. Invariant: `json()` is the
    body middleware's parse when it made one (the same value `json.loads` gives), and `form()`
    never parses on the event loop."""

    async def json(self) -> Any:
        """The body as JSON: the middleware's parse, else (a body it did not take for JSON, as
        its declared type said) parsed here on a worker thread. Raises InvalidJson."""
        if PARSED_JSON in self.scope:
            return self.scope[PARSED_JSON]
        return await asyncio.to_thread(loads_bounded, await self.body())

    async def form(self, **_limits: Any) -> FormData:  # type: ignore[override]
        # NOTE: FastAPI passes Starlette's limits on files, fields and part size; the form's own
        # bounds (api/http/multipart_form.py) and the route's body limit stand in for them.
        pieces = [piece async for piece in self.stream()]  # as they came: a body of megabytes is never joined
        try:
            return await asyncio.to_thread(parse_multipart, self.headers.get("content-type", ""), pieces)
        except FormRefused as exc:
            raise HTTPException(400, f"The request body is not a form this route reads: {exc}") from None


class ParsedBodyRoute(APIRoute):
    """An APIRoute whose endpoint reads its body through ParsedBodyRequest."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def handle(request: Request) -> Response:
            return await handler(ParsedBodyRequest(request.scope, request.receive))

        return handle
