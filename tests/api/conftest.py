"""Live Chorus servers for the API tests: uvicorn on a free 127.0.0.1 port, in a thread."""
from __future__ import annotations

import socket
import threading
import time

import httpx
import pytest
import uvicorn

from api.app import create_app
from api.deepgram.socket import ws_max_size
from api.http.protocol import BoundedWebSocketProtocol, bounded_h11
from api.config.settings import ApiSettings
from engine.client import EngineClient
from model.tiny_random import ensure_tiny_random
from tests.engine.conftest import engine_config, wall_clock_capacity

API_KEY = "test-key"
# Short utterances: "Hello there." gets (0.5 + 12 * 0.05) s ≈ 1.1 s of audio (≈ 13 frames).
FAST_SETTINGS = dict(audio_seconds_per_char=0.05, min_audio_seconds=0.5)


class LiveServer:
    """A uvicorn server on its own thread and event loop; `url` is its base URL."""

    def __init__(self, app, **uvicorn_config) -> None:
        self.app = app
        self._socket = socket.socket()
        self._socket.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._socket.getsockname()[1]}"
        # As `chorus serve` runs.
        uvicorn_config.setdefault("http", bounded_h11())
        uvicorn_config.setdefault("ws", BoundedWebSocketProtocol)
        uvicorn_config.setdefault("ws_max_size", ws_max_size(app.state.settings))
        self._server = uvicorn.Server(uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=2,
                                                     **uvicorn_config))
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True)

    def __enter__(self) -> "LiveServer":
        self._thread.start()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/ready", timeout=2).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        raise RuntimeError("the test server did not become ready")

    def __exit__(self, *exc) -> None:
        self._server.should_exit = True
        self._thread.join(30)
        self._socket.close()

    @property
    def engine(self):
        return self.app.state.engine


def start_server(
    api_key: str | None = API_KEY, num_blocks: int = 512, settings: dict | None = None,
    max_queue_delay: float | None = None, **scheduler
) -> LiveServer:
    """A live server of the tiny model; `max_queue_delay` turns admission on (wall_clock_capacity)."""
    capacity = wall_clock_capacity(max_queue_delay=max_queue_delay)
    config = engine_config(str(ensure_tiny_random()), num_blocks=num_blocks, capacity=capacity, **scheduler)
    config.num_threads = 1
    return LiveServer(create_app(config, ApiSettings(api_keys=(api_key,) if api_key else (), **(settings or FAST_SETTINGS))))


@pytest.fixture(scope="session")
def server(chorus_cache):
    """The shared server (API key on): tests that need other engine limits start their own."""
    with start_server() as live:
        yield live


@pytest.fixture(scope="session")
def joe_server(chorus_cache):
    """A server of the built-in voice (no key), shared by the suites that need real speech."""
    from tests.voice_packages import require_voice_packages

    require_voice_packages()
    from engine.config import EngineConfig
    from model.config import ModelConfig

    config = EngineConfig(model=ModelConfig(model="joe", device="cpu"), mode="inproc")
    with LiveServer(create_app(config, ApiSettings())) as live:
        yield live


@pytest.fixture(scope="session")
def auth() -> dict[str, str]:
    return {"Authorization": f"Bearer {API_KEY}"}


def speech_body(**overrides) -> dict:
    body = {"model": "tts-1", "input": "Hello there.", "voice": "alloy", "response_format": "pcm", "seed": 7}
    body.update(overrides)
    return body


class PostedCommands(list):
    """Every command the API sent an engine core, in order; `at[id(command)]`: when."""

    def __init__(self) -> None:
        super().__init__()
        self.at: dict[int, float] = {}


@pytest.fixture
def posted(monkeypatch) -> PostedCommands:
    """Records every command any EngineClient posts to its core while the test runs."""
    commands = PostedCommands()
    post = EngineClient._post

    def recording(self, command):
        commands.append(command)
        commands.at[id(command)] = time.monotonic()
        return post(self, command)

    monkeypatch.setattr(EngineClient, "_post", recording)
    return commands


def prepared_texts(app) -> list[str]:
    """The texts `app`'s front end is handed from now on (directly or by the prompt pool), in order."""
    frontend = app.state.engine.frontend
    texts: list[str] = []
    prepare = frontend.prepare

    def recording(text, *args, **kwargs):
        texts.append(text)
        return prepare(text, *args, **kwargs)

    frontend.prepare = recording
    app.state.planner.pool._prepare = recording
    return texts
