"""What the app does before a route runs, driven at the ASGI level so that what is *not* read can
be seen: the key is checked from the headers before any body byte is read; an upload takes a slot
(in all and per key) before its body is read, and gives it back however it ends; a JSON body is
held to the common limit on the upload route; a large JSON body is parsed off the event loop, once;
a multipart body is parsed on a worker thread."""
from __future__ import annotations

import asyncio
import io
import json
import threading

import pytest

import api.http.body_limit as body_limit
from api.app import create_app
from api.config.settings import ApiSettings
from api.http.multipart_form import MAX_FIELD_BYTES, MAX_FIELDS, FormRefused, parse_multipart
from api.http.parsed_body import INLINE_JSON_BYTES, PARSED_JSON
from api.http.upload_slots import UploadSlots
from tests.engine.conftest import engine_config

KEY = "k-one"
VOICES = "/v1/audio/voices"


class Exchange:
    """One request sent straight to an ASGI app. The body comes as `chunks`, each handed over
    only when the app asks for it (`reads` counts the asks); `hold` keeps the last one back
    until it is set."""

    def __init__(self, app, method: str, path: str, headers: dict[str, str], chunks: list[bytes],
                 hold: asyncio.Event | None = None) -> None:
        self.app, self.chunks, self.hold = app, list(chunks), hold
        self.scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
                      "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
                      "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
                      "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80)}
        self.reads = 0
        self.status: int | None = None
        self.headers: dict[bytes, bytes] = {}
        self.body = b""

    async def run(self) -> "Exchange":
        async def receive():
            self.reads += 1
            if len(self.chunks) == 1 and self.hold is not None:
                await self.hold.wait()
            if not self.chunks:
                return {"type": "http.disconnect"}
            chunk = self.chunks.pop(0)
            return {"type": "http.request", "body": chunk, "more_body": bool(self.chunks)}

        async def send(message):
            if message["type"] == "http.response.start":
                self.status = message["status"]
                self.headers = dict(message.get("headers", []))
            elif message["type"] == "http.response.body":
                self.body += message.get("body", b"")

        await self.app(self.scope, receive, send)
        return self

    def json(self) -> dict:
        return json.loads(self.body)


def app(**settings):
    """The app as `chorus serve` builds it; its lifespan is not run, so a request that gets past
    the middleware finds no engine (a 500 here), which these tests never need."""
    return create_app(engine_config("tiny-random", num_blocks=16), ApiSettings(**settings))


def exchange(application, method, path, headers=None, chunks=(b"",), hold=None) -> Exchange:
    return asyncio.run(Exchange(application, method, path, headers or {}, list(chunks), hold).run())


MIB = [b"[" * 65536] * 240  # 15 MiB of JSON-looking bytes, chunked with no declared size


@pytest.mark.parametrize("path, shape", [(VOICES, "error"), ("/v1/audio/speech", "error"), ("/v1/speak", "err_code")])
def test_the_key_is_checked_before_a_byte_of_the_body_is_read(path, shape):
    answer = exchange(app(api_keys=(KEY,)), "POST", path, {"content-type": "application/json"}, MIB)
    assert answer.status == 401 and shape in answer.json()
    assert answer.reads == 0


def test_a_json_body_on_the_upload_route_has_the_common_limit():
    application = app()
    declared = exchange(application, "POST", VOICES, {"content-type": "application/json",
                                                      "content-length": str(15 * 2**20)}, MIB)
    assert declared.status == 413 and declared.reads == 0
    chunked = exchange(application, "POST", VOICES, {"content-type": "application/json"}, MIB)
    assert chunked.status == 413 and chunked.reads == 2  # 64 KiB, then one message past the limit


def test_a_multipart_upload_may_be_larger():
    answer = exchange(app(), "POST", VOICES, {"content-type": "multipart/form-data; boundary=x"}, MIB)
    assert answer.status != 413 and answer.reads == len(MIB)


def test_uploads_past_the_slots_are_refused_before_their_body_and_the_slots_come_back():
    application = app(api_keys=("k-one", "k-two"), max_uploads_in_progress=3, max_uploads_per_key=2)
    form = {"content-type": "multipart/form-data; boundary=x"}

    async def main():
        hold = asyncio.Event()
        one = {**form, "authorization": "Bearer k-one"}
        two = {**form, "authorization": "Bearer k-two"}
        held, running = [], []
        for headers in (one, one, two):  # each reads its first chunk, then holds
            held.append(Exchange(application, "POST", VOICES, headers, [b"--x", b"--"], hold))
            running.append(asyncio.create_task(held[-1].run()))
            while held[-1].reads < 1:
                await asyncio.sleep(0.01)
            if len(held) == 2:
                third_of_one = await Exchange(application, "POST", VOICES, one, [b"--x--"]).run()
        two_more = await Exchange(application, "POST", VOICES, two, [b"--x--"]).run()
        hold.set()
        await asyncio.gather(*running)
        after = await Exchange(application, "POST", VOICES, one, [b"--x--"]).run()
        return third_of_one, two_more, after

    third_of_one, two_more, after = asyncio.run(main())
    for refused, why in ((third_of_one, "this key has 2 uploads in progress"),
                         (two_more, "3 uploads are in progress on this server")):
        assert refused.status == 429 and refused.reads == 0
        assert refused.headers[b"retry-after"] == b"1"
        assert refused.json()["error"]["code"] == "too_many_uploads" and why in refused.json()["error"]["message"]
    assert after.status != 429  # every slot came back, though each of those requests failed


def test_upload_slots_count_in_all_and_per_key():
    slots = UploadSlots(total=3, per_owner=2)
    assert slots.take("a") is None and slots.take("a") is None
    assert "this key has 2" in slots.take("a")
    assert slots.take(None) is None  # no key: only the total bounds it
    assert "3 uploads" in slots.take("b")
    slots.give_back("a")
    assert slots.take("b") is None and slots.in_progress == 3
    with pytest.raises(RuntimeError):
        slots.give_back("c")


def test_a_large_json_body_is_parsed_once_off_the_event_loop(monkeypatch):
    threads: list[str] = []
    parse = body_limit.loads_bounded

    def recording(raw):
        threads.append(threading.current_thread().name)
        return parse(raw)

    monkeypatch.setattr(body_limit, "loads_bounded", recording)
    seen = {}

    async def route(scope, receive, send):
        seen["json"] = scope.get(PARSED_JSON)
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    middleware = body_limit.BodySizeLimitMiddleware(route, max_bytes=65536)
    for size in (100, INLINE_JSON_BYTES + 1000):
        body = json.dumps({"input": "x" * size}).encode()
        answer = asyncio.run(Exchange(middleware, "POST", "/v1/audio/speech", {}, [body]).run())
        assert answer.status == 204 and seen["json"] == {"input": "x" * size}
    assert threads[0] == threading.main_thread().name  # a small body: inline
    assert threads[1] != threading.main_thread().name and len(threads) == 2


def form_body(*parts: tuple[str, str | bytes, str | None]) -> bytes:
    out = io.BytesIO()
    for name, value, filename in parts:
        disposition = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename else "")
        out.write(f"--b\r\nContent-Disposition: {disposition}\r\n\r\n".encode())
        out.write(value if isinstance(value, bytes) else value.encode())
        out.write(b"\r\n")
    out.write(b"--b--\r\n")
    return out.getvalue()


@pytest.mark.parametrize("piece", [10**6, 7, 1])
def test_a_form_is_parsed_with_its_fields_and_files_from_its_pieces(piece):
    body = form_body(("name", "Ann", None), ("audio", b"\x00RIFF" * 1000, "clip.wav"))
    form = parse_multipart("multipart/form-data; boundary=b", [body[i:i + piece] for i in range(0, len(body), piece)])
    assert form["name"] == "Ann"
    assert form["audio"].filename == "clip.wav" and form["audio"].file.read() == b"\x00RIFF" * 1000


@pytest.mark.parametrize("content_type, body, why", [
    ("application/json", b"{}", "must be multipart/form-data"),
    ("multipart/form-data", b"--b--", "no boundary"),
    ("multipart/form-data; boundary=b", form_body(("n", "x" * (MAX_FIELD_BYTES + 1), None)), "larger than"),
    ("multipart/form-data; boundary=b", form_body(*[(f"f{i}", "v", None) for i in range(MAX_FIELDS + 1)]),
     "more than"),
    ("multipart/form-data; boundary=b", b"--b\r\nContent-Type: text/plain\r\n\r\nx\r\n--b--\r\n", "has no name"),
])
def test_a_form_this_server_does_not_read_is_refused(content_type, body, why):
    with pytest.raises(FormRefused, match=why):
        parse_multipart(content_type, [body])


def test_a_refused_form_is_a_400_naming_why():
    answer = exchange(app(), "POST", VOICES, {"content-type": "multipart/form-data; boundary=b"},
                      [b"--b\r\nContent-Type: text/plain\r\n\r\nx\r\n--b--\r\n"])
    assert answer.status == 400 and "has no name" in answer.json()["error"]["message"]
