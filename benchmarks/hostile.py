"""Hostile inputs for a Chorus server, and the probes that watch it take them (issue 34, "No
single request can take the server down"): the largest inputs the routes accept, the resident
memory of a process sampled from /proc, /health timed on a thread of its own, and scripted
speak-socket sessions that record how the server answered and how the connection ended; and
the cases built of them: one input alone on one route, and the issue's malformed requests.

Shared by the reliability benchmark's hostile phase (benchmarks/reliability.py) and the
hostile-input tests (tests/api/live/test_hostile_inputs.py). Only 127.0.0.1 is ever targeted.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Awaitable, Callable, Sequence, Union

import httpx

from api.openai.schemas import MAX_INPUT_CHARS
from benchmarks.server_process import ServerProcess, chorus_server, free_port
from evaluation import eval_sentences
from capacity.overrun import nearest_rank

RSS_SAMPLE_S = 0.05
HEALTH_PROBE_S = 0.02
# A probe slower than this has met a server that stopped answering: counted failed, not waited on.
HEALTH_TIMEOUT_S = 5.0
# The speak socket's turn is as long as a REST input; Deepgram's Speak carries at most 2,000.
SPEAK_MESSAGE_CHARS = 2000
# websockets' close codes for a connection lost without a close frame, and for the server's own fault.
NO_CLOSE_FRAME, INTERNAL_ERROR = 1006, 1011
_TCP_ESTABLISHED = "01"  # Linux's /proc/net/tcp state column

# A speech may take this long to begin on a busy 2-core machine before it counts as no answer.
ANSWER_WAIT_S = 120.0
# Before each case alone the server may take this long to finish what the last one left.
IDLE_WAIT_S = 30.0
# Query values no route takes: past Latin-1, CR LF, NUL, not UTF-8 (each gave a 500 or a drop).
BAD_QUERY_VALUES = ("%E2%9C%93", "%0D%0A", "%00", "%FF")
DEEPGRAM_QUERY_PARAMS = ("model", "encoding", "container", "sample_rate", "speed")
# Brackets this deep take 60 KB, inside the 64 KiB body limit and far past a parser's recursion.
NESTED_DEPTH = 30_000

# A case's outcome when its growth stopped the server.
STOPPED = "stopped at the ceiling"

# What a socket script sends: a dict as a JSON text message, a str as a text message as it is,
# bytes as a binary message.
SocketMessage = Union[dict, str, bytes]


def speech(text: str, **extra) -> dict:
    """An OpenAI speech request's body: raw pcm, so that its first bytes are audio."""
    return {"model": "tts-1", "voice": "alloy", "input": text, "response_format": "pcm", **extra}


def rss_mb(pid: int) -> float:
    """The resident memory of process `pid` (VmRSS), in MiB; 0 for a process that has exited."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def largest_inputs() -> dict[str, str]:
    """The issue's four inputs of the most characters a route accepts, by name: runs of words
    without a sentence end that a front end turns into ever longer prompts (numbers spelled out
    the longest), and ordinary prose for comparison."""
    sentences = eval_sentences()
    prose = " ".join(sentences * (MAX_INPUT_CHARS // len(" ".join(sentences)) + 1))
    return {"'a ' x 2048": "a " * 2048, "'1 ' x 2048": "1 " * 2048,
            "13-digit numbers": ("1234567890123 " * 293)[:MAX_INPUT_CHARS], "eval prose": prose[:MAX_INPUT_CHARS]}


def speak_script(text: str, chunk_chars: int = SPEAK_MESSAGE_CHARS) -> list[SocketMessage]:
    """`text` as one speak-socket turn: Speak messages of at most `chunk_chars`, then a Flush."""
    pieces = [text[i:i + chunk_chars] for i in range(0, len(text), chunk_chars)]
    return [{"type": "Speak", "text": piece} for piece in pieces] + [{"type": "Flush"}]


def nested_json(depth: int, inner: str = "") -> str:
    """Arrays `depth` levels deep around `inner`: past any recursive parser's limit when deep."""
    return "[" * depth + inner + "]" * depth


class RssSampler:
    """The resident memory of one process, sampled every RSS_SAMPLE_S on a thread between
    entering and leaving. Invariant: `peak_mb` is the largest sample so far (`before_mb`, taken
    on entering, included); once a sample exceeds `before_mb + ceiling_mb`, `over_ceiling` is set
    and `on_ceiling` has been called, once, and sampling stops (the caller stops the process:
    an unbounded allocation must not take the machine with it)."""

    def __init__(self, pid: int, ceiling_mb: float = float("inf"), on_ceiling: Callable[[], None] = lambda: None):
        self.pid = pid
        self.ceiling_mb = ceiling_mb
        self.on_ceiling = on_ceiling
        self.before_mb = self.peak_mb = 0.0
        self.over_ceiling = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> "RssSampler":
        self.before_mb = self.peak_mb = rss_mb(self.pid)
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def growth_mb(self) -> float:
        return self.peak_mb - self.before_mb

    def _sample(self) -> None:
        while not self._stop.wait(RSS_SAMPLE_S):
            self.peak_mb = max(self.peak_mb, rss_mb(self.pid))
            if self.growth_mb > self.ceiling_mb:
                self.over_ceiling = True
                self.on_ceiling()
                return


class HealthProbe:
    """GET /health every `interval_s` on one kept-alive connection, on a thread of its own (so a
    busy client event loop cannot delay it), between entering and leaving. Invariant:
    `latencies_s` holds one entry per probe sent, in order (a failed one counts the time it
    took); `failures` counts those that got no 200 (an error status, a broken connection, or no
    answer within HEALTH_TIMEOUT_S)."""

    def __init__(self, base_url: str, interval_s: float = HEALTH_PROBE_S) -> None:
        self.url = base_url + "/health"
        self.interval_s = interval_s
        self.latencies_s: list[float] = []
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._probe, daemon=True)

    def __enter__(self) -> "HealthProbe":
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        self._thread.join()

    def _probe(self) -> None:
        with httpx.Client(timeout=HEALTH_TIMEOUT_S) as client:
            while True:
                started = time.monotonic()
                try:
                    self.failures += client.get(self.url).status_code != 200
                except httpx.HTTPError:
                    self.failures += 1
                self.latencies_s.append(time.monotonic() - started)
                if self._stop.wait(self.interval_s):
                    return

    def summary(self) -> dict:
        """Probes, failures and the latency quantiles (nearest rank), in milliseconds."""
        values = self.latencies_s or [0.0]
        quantiles = {f"p{round(100 * q)}_ms": 1000 * nearest_rank(values, q) for q in (0.5, 0.9, 0.99)}
        return {"probes": len(self.latencies_s), "failures": self.failures, **quantiles, "max_ms": 1000 * max(values)}


@dataclass
class SocketOutcome:
    """How one scripted speak-socket session went, as its client saw it. Invariant:
    `close_code` is None exactly when the server had not closed the connection when the session
    ended (the client closed it: every Flush was answered, or `timed_out`); NO_CLOSE_FRAME when
    the connection ended without a close frame."""

    messages: list[dict] = field(default_factory=list)  # the JSON messages received, in order
    audio_bytes: int = 0
    first_audio_s: float | None = None
    flushes: int = 0  # Flush messages sent
    client_closed: bool = False  # a Close message was sent
    close_code: int | None = None
    close_reason: str = ""
    timed_out: bool = False

    def of_type(self, kind: str) -> list[dict]:
        return [message for message in self.messages if message.get("type") == kind]

    @property
    def unanswered_flushes(self) -> int:
        return self.flushes - len(self.of_type("Flushed"))

    @property
    def dropped(self) -> bool:
        """The server ended it as no well-behaved server does: without a close frame, with an
        internal error, or (unless the client asked with Close) without saying why."""
        if self.close_code in (NO_CLOSE_FRAME, INTERNAL_ERROR):
            return True
        return self.close_code is not None and not self.client_closed and not self.close_reason

    def describe(self) -> str:
        kinds = [message.get("type") for message in self.messages]
        return (f"received {kinds[:12]}{'…' if len(kinds) > 12 else ''}, {self.audio_bytes} audio bytes, "
                f"{self.unanswered_flushes} of {self.flushes} Flushes unanswered, close {self.close_code} "
                f"{self.close_reason!r}{', timed out' if self.timed_out else ''}")


def socket_status(outcome: SocketOutcome) -> str:
    """A session's outcome in a word or two: "dropped <code>", "audio", "Error <variant>",
    "closed <code>", "Warning <code>", or "no answer"."""
    errors, warnings = outcome.of_type("Error"), outcome.of_type("Warning")
    if outcome.dropped:
        return f"dropped {outcome.close_code}"
    if outcome.audio_bytes:
        return "audio"
    if errors:
        return f"Error {errors[0].get('variant')}"
    if outcome.close_code is not None:
        return f"closed {outcome.close_code}"
    return f"Warning {warnings[0].get('code')}" if warnings else "no answer"


@dataclass
class SpeechRead:
    """One HTTP speech request as its client read it. Invariant: `dropped` names the transport
    error when the connection broke before the client was done (`status` None when no answer
    came at all); `first_audio_s` and `audio_bytes` count a 200's body only; `body` holds the
    body of any other answer."""

    status: int | None = None
    first_audio_s: float | None = None
    audio_bytes: int = 0
    body: bytes = b""
    dropped: str | None = None

    @property
    def outcome(self) -> str:
        return f"dropped ({self.dropped})" if self.dropped is not None else str(self.status)


async def read_speech(client: httpx.AsyncClient, path: str, read_s: float | None = None, **request) -> SpeechRead:
    """POSTs `request` (httpx's json=, content=, headers=) to `path` and reads the answer until
    it ends or, for a 200, until `read_s` after its first audio (then the client leaves)."""
    read = SpeechRead()
    started = time.monotonic()
    try:
        async with client.stream("POST", path, **request) as response:
            read.status = response.status_code
            async for chunk in response.aiter_bytes():
                if read.status != 200:
                    read.body += chunk
                    continue
                read.audio_bytes += len(chunk)
                if read.first_audio_s is None:
                    read.first_audio_s = time.monotonic() - started
                if read_s is not None and time.monotonic() - started > read.first_audio_s + read_s:
                    break
    except httpx.HTTPError as exc:
        read.dropped = type(exc).__name__
    return read


def ws_url(base_url: str, **query: str) -> str:
    params = "&".join(f"{name}={value}" for name, value in query.items())
    return base_url.replace("http://", "ws://", 1) + "/v1/speak" + (f"?{params}" if params else "")


async def speak_session(url: str, script: Sequence[SocketMessage], wait_s: float, until_closed: bool = False,
                        read_s: float | None = None) -> SocketOutcome:
    """Sends `script` (stopping early if the server closes), then reads until every Flush sent is
    answered (or, `until_closed`, until the server closes), the server closes, `wait_s` passes
    since the first message, or `read_s` since the first audio; closes the connection if the
    server has not."""
    import websockets

    outcome = SocketOutcome()
    # NOTE: no proxy (websockets would take one from the environment), and no compression: a
    # megabyte of text goes over the wire as a megabyte, as a careless client's would.
    ws = await websockets.connect(url, proxy=None, compression=None, open_timeout=10, close_timeout=5)
    started = time.monotonic()
    deadline = started + wait_s
    try:
        await _send_script(ws, script, outcome)
        while until_closed or outcome.client_closed or outcome.unanswered_flushes > 0:
            frame = await asyncio.wait_for(ws.recv(), max(0.0, deadline - time.monotonic()))
            _record(outcome, frame, started)
            if read_s is not None and outcome.first_audio_s is not None:
                deadline = min(deadline, started + outcome.first_audio_s + read_s)
    except websockets.ConnectionClosed as closed:
        outcome.close_code = closed.rcvd.code if closed.rcvd is not None else NO_CLOSE_FRAME
        outcome.close_reason = closed.rcvd.reason if closed.rcvd is not None else ""
    except asyncio.TimeoutError:
        outcome.timed_out = True
    finally:
        with contextlib.suppress(websockets.ConnectionClosed):  # closed already: nothing to close
            await _websockets_bug_tolerated(ws, ws.close())
    return outcome


async def _send_script(ws, script: Sequence[SocketMessage], outcome: SocketOutcome) -> None:
    for message in script:
        await _websockets_bug_tolerated(ws, ws.send(json.dumps(message) if isinstance(message, dict) else message))
        if isinstance(message, dict):
            outcome.flushes += message.get("type") == "Flush"
            outcome.client_closed |= message.get("type") == "Close"
        if outcome.client_closed:
            return  # the server ends the session on Close: nothing after it is read


async def _websockets_bug_tolerated(ws, call: Awaitable) -> None:
    """Awaits a send or close of `ws`. NOTE: websockets 17 (on Python 3.11) aborts a transport
    that asyncio has already closed when the server closes during a long send, and asyncio raises
    AttributeError: the connection is closed, as the close frames it recorded say."""
    import websockets

    try:
        await call
    except AttributeError:
        protocol = ws.protocol
        raise websockets.ConnectionClosedError(protocol.close_rcvd, protocol.close_sent,
                                               protocol.close_rcvd_then_sent) from None


def _record(outcome: SocketOutcome, frame: str | bytes, started: float) -> None:
    if isinstance(frame, bytes):
        outcome.audio_bytes += len(frame)
        if outcome.first_audio_s is None:
            outcome.first_audio_s = time.monotonic() - started
        return
    try:
        message = json.loads(frame)
    except ValueError:
        message = None
    outcome.messages.append(message if isinstance(message, dict) else {"type": None, "raw": frame[:200]})


async def idle_socket(url: str, wait_s: float) -> tuple[float | None, SocketOutcome]:
    """A speak socket that sends nothing: the seconds until the server closed it (None: not
    within `wait_s`), and how it did."""
    started = time.monotonic()
    outcome = await speak_session(url, [], wait_s, until_closed=True)
    return (time.monotonic() - started if outcome.close_code is not None else None), outcome


def never_reading_socket(url: str, script: Sequence[SocketMessage], wait_s: float) -> float | None:
    """Opens a speak socket with a small receive window, sends `script`, and reads nothing after
    the handshake: the seconds until the server let the connection go (its end of it no longer
    ESTABLISHED, as Linux's /proc/net/tcp shows), or None when it still held it after `wait_s`.
    (A server cannot send a close frame to a client that reads nothing, so the client side
    cannot tell; the server's socket can.)"""
    from websockets.client import ClientProtocol
    from websockets.protocol import State
    from websockets.uri import parse_uri

    uri = parse_uri(url)
    protocol = ClientProtocol(uri)
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connecting: a small window
        sock.settimeout(10)
        sock.connect((uri.host, uri.port))
        protocol.send_request(protocol.connect())
        sock.sendall(b"".join(protocol.data_to_send()))
        while protocol.state is State.CONNECTING and (data := sock.recv(4096)):
            protocol.receive_data(data)
        if protocol.state is not State.OPEN:
            raise RuntimeError(f"the speak socket's handshake failed: {protocol.handshake_exc}")
        for message in script:
            if isinstance(message, bytes):
                protocol.send_binary(message)
            else:
                protocol.send_text((json.dumps(message) if isinstance(message, dict) else message).encode())
        sock.sendall(b"".join(protocol.data_to_send()))
        sent = time.monotonic()
        client_port, server_port = sock.getsockname()[1], uri.port
        while time.monotonic() - sent < wait_s:
            if server_socket_state(server_port, client_port) != _TCP_ESTABLISHED:
                return time.monotonic() - sent
            time.sleep(0.1)
        return None


def server_socket_state(server_port: int, client_port: int) -> str | None:
    """The state (Linux's hex code) of the server's end of the IPv4 TCP connection between the
    two ports, or None when it has none any more."""
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, remote, state = line.split()[1:4]
        if int(local.rsplit(":", 1)[1], 16) == server_port and int(remote.rsplit(":", 1)[1], 16) == client_port:
            return state
    return None


class RestartingServer:
    """`chorus serve` for hostile cases, started on first use and again after `stop` (a case
    past the RSS ceiling must not spoil the next). Invariant: `ensure()` returns a server that
    answered /ready, has spoken one normal request, and has not been stopped since; `starts`
    counts the servers started."""

    def __init__(self, model: str, flags: Sequence[str] = ()) -> None:
        self.model, self.flags = model, list(flags)
        self.starts = 0
        self._server: ServerProcess | None = None

    def __enter__(self) -> "RestartingServer":
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def ensure(self) -> ServerProcess:
        if self._server is None:
            self._server = chorus_server(self.model, free_port(), self.flags).__enter__()
            self.starts += 1
            # NOTE: a server's first speech sets up pools and buffers that it keeps (about 60 MB
            # of joe's API process): spoken first, so that no hostile case is charged for them.
            httpx.post(f"{self._server.base_url}/v1/audio/speech", json=speech(eval_sentences()[0]),
                       timeout=ANSWER_WAIT_S)
        return self._server

    def stop(self) -> None:
        """Stops the server (from any thread: the RSS sampler's too); the next `ensure` starts one."""
        server, self._server = self._server, None
        if server is not None:
            server.stop()


# A route's call with one input: its outcome (HTTP status, socket status or "dropped (...)"),
# seconds to the first audio (None without audio) and the audio bytes read.
RouteCall = Callable[[str, str, float], Awaitable[tuple[str, float | None, int]]]


async def openai_route(base_url: str, text: str, read_s: float) -> tuple[str, float | None, int]:
    async with httpx.AsyncClient(base_url=base_url, timeout=ANSWER_WAIT_S) as client:
        read = await read_speech(client, "/v1/audio/speech", read_s, json=speech(text))
    return read.outcome, read.first_audio_s, read.audio_bytes


async def deepgram_rest_route(base_url: str, text: str, read_s: float) -> tuple[str, float | None, int]:
    async with httpx.AsyncClient(base_url=base_url, timeout=ANSWER_WAIT_S) as client:
        read = await read_speech(client, "/v1/speak?encoding=linear16&container=none", read_s, json={"text": text})
    return read.outcome, read.first_audio_s, read.audio_bytes


async def speak_socket_route(base_url: str, text: str, read_s: float) -> tuple[str, float | None, int]:
    """`text` as one turn: Speak messages of at most 2,000 characters, then a Flush."""
    outcome = await speak_session(ws_url(base_url, encoding="linear16"), speak_script(text), ANSWER_WAIT_S,
                                  read_s=read_s)
    return socket_status(outcome), outcome.first_audio_s, outcome.audio_bytes


ROUTES: dict[str, RouteCall] = {"openai": openai_route, "deepgram rest": deepgram_rest_route,
                                "speak socket": speak_socket_route}


async def alone(servers: RestartingServer, route: str, name: str, text: str, read_s: float, after_s: float,
                ceiling_mb: float) -> dict:
    """One input on one route, on a server first left to go idle: the outcome, the first audio,
    the API process's RSS before, at its peak (until `after_s` after the request ended) and
    then, and whether a normal request is served after it. A case past `ceiling_mb` of growth
    stops the server (the next case gets a fresh one) and is answered "stopped at the ceiling"."""
    server = servers.ensure()
    waited = server.wait_idle(IDLE_WAIT_S)
    with RssSampler(server.api_pid, ceiling_mb, servers.stop) as rss:
        outcome, first_audio, audio_bytes = await ROUTES[route](server.base_url, text, read_s)
        await asyncio.sleep(after_s)
    if rss.over_ceiling:  # the stop cut the request: its own outcome says nothing more
        outcome = STOPPED
    record = {"route": route, "input": name, "outcome": outcome, "first_audio_s": first_audio,
              "audio_bytes": audio_bytes, "waited_idle_s": waited, "rss_before_mb": rss.before_mb,
              "rss_peak_mb": rss.peak_mb, "rss_growth_mb": rss.growth_mb, "over_ceiling": rss.over_ceiling,
              "rss_after_mb": None, "normal_after": None}
    if not rss.over_ceiling:
        record["rss_after_mb"] = rss_mb(server.api_pid)
        record["normal_after"] = (await openai_route(server.base_url, eval_sentences()[0], read_s))[0]
    return record


async def malformed_requests(base_url: str) -> list[dict]:
    """The issue's malformed requests, one at a time: bad query values on both REST routes and
    the socket's handshake, JSON nested far too deep (bodies and a socket message), and socket
    messages of 1 MB and 10 MB. Each: {"request", "outcome", "failed"} (see `failed`)."""
    records = []

    async def http(name: str, path: str, **request) -> None:
        async with httpx.AsyncClient(base_url=base_url, timeout=ANSWER_WAIT_S) as client:
            read = await read_speech(client, path, **request)
        records.append({"request": name, "outcome": read.outcome, "failed": failed(read.outcome)})

    async def socket_script(name: str, script: list[SocketMessage]) -> None:
        outcome = socket_status(await speak_session(ws_url(base_url), script, ANSWER_WAIT_S))
        records.append({"request": name, "outcome": outcome, "failed": failed(outcome)})

    for value in BAD_QUERY_VALUES:
        for param in DEEPGRAM_QUERY_PARAMS:
            await http(f"POST /v1/speak?{param}={value}", f"/v1/speak?{param}={value}", json={"text": "Hi."})
        await http(f"POST /v1/audio/speech?voice={value}", f"/v1/audio/speech?voice={value}", json=speech("Hi."))
        records.append(await _handshake(f"socket handshake ?model={value}", ws_url(base_url, model=value)))
    deep = nested_json(NESTED_DEPTH)
    headers = {"content-type": "application/json"}
    await http("POST /v1/audio/speech, JSON 30,000 deep", "/v1/audio/speech",
               content=json.dumps(speech("Hi."))[:-1] + f', "x": {deep}}}', headers=headers)
    await http("POST /v1/speak, JSON 30,000 deep", "/v1/speak", content=f'{{"text": "Hi.", "x": {deep}}}',
               headers=headers)
    await socket_script("socket message, JSON 30,000 deep",
                        [f'{{"type": "Speak", "text": "Hi.", "x": {deep}}}', {"type": "Flush"}])
    for megabytes in (1, 10):
        big = json.dumps({"type": "Speak", "text": "a " * (megabytes << 19)})
        await socket_script(f"socket message of {megabytes} MB", [big, {"type": "Flush"}])
    return records


async def _handshake(name: str, url: str) -> dict:
    """A socket handshake's outcome: "101" (accepted), the refusal's HTTP status, or dropped."""
    import websockets

    try:
        async with websockets.connect(url, proxy=None, open_timeout=10):
            outcome = "101"
    except websockets.InvalidStatus as refused:
        outcome = str(refused.response.status_code)
    except (OSError, asyncio.TimeoutError, websockets.WebSocketException) as exc:
        outcome = f"dropped ({type(exc).__name__})"
    return {"request": name, "outcome": outcome, "failed": failed(outcome)}


def failed(outcome: str) -> bool:
    """Whether an outcome (an HTTP status, a socket's status, "dropped ...") is one no input may
    cause: a 5xx, or a connection dropped without an answer or closed abnormally."""
    return outcome.startswith(("dropped", "5"))
