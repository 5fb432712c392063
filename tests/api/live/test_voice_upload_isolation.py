"""A real `chorus serve` (the Qwen3-TTS Base test model) given voice uploads of many channels
while a speech streams: 7.1 becomes a voice, 12 and 255 channels are refused from their metadata,
and a 7.1 AIFF that crashes its decoder (PyAV 18 frees its custom-order layout twice) costs that
upload alone. Each is answered within a second, the speech finishes whole, /health stays 200 and
the API process lives on."""
from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

import httpx
import numpy as np

from benchmarks.hostile_media import channels_of, encoded, wav_of
from benchmarks.server_process import ServerProcess, free_port
from tests.api.conftest import speech_body
from tests.api.voice_clips import BASE, CUSTOM_ORDER_7_1, GOLDEN, wav_bytes

VOICES = "/v1/audio/voices"
LONG = " ".join(f"Sentence number {i} keeps this speech going for a good while longer." for i in range(40))


class Speech(threading.Thread):
    """One SSE speech read to its end on a thread of its own, its events kept with when each
    came. Until `listened` is set it is read as a player would, in real time (the test model
    makes seconds of audio in a fraction of a second); then at once."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.events: list[tuple[float, dict]] = []
        self.status: int | None = None
        self.started, self.listened = threading.Event(), threading.Event()

    def run(self) -> None:
        body = speech_body(input=LONG, voice="Warm", stream_format="sse")  # a Base model speaks cloned voices only
        try:
            with httpx.stream("POST", self.url + "/v1/audio/speech", json=body, timeout=120) as response:
                self.status = response.status_code
                for line in response.iter_lines():
                    if line.startswith("data:"):
                        self.events.append((time.monotonic(), event := json.loads(line[5:])))
                        self.started.set()
                        # base64 of 16-bit PCM at 24 kHz: 64,000 characters a second.
                        self.listened.wait(len(event.get("audio", "")) / 64_000)
        finally:
            self.started.set()


def decoder_parents(session: int) -> set[int]:
    """The processes that started the clip decoders of a session: its API process."""
    parents = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            state, parent, _, in_session = stat.read_text().rsplit(")", 1)[1].split()[:4]
            command = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if int(in_session) == session and state != "Z" and b"api.voices.clip_worker" in command:
            parents.add(int(parent))
    return parents


def post_voice(url: str, name: str, data: bytes, filename: str) -> httpx.Response:
    return httpx.post(url + VOICES, data={"name": name}, files={"audio": (filename, data, "application/octet-stream")},
                      timeout=30)


def test_many_channel_uploads_leave_the_server_and_its_streams_alone(chorus_cache, tmp_path):
    port = free_port()
    command = [sys.executable, "-m", "api.cli", "serve", "--model", BASE, "--device", "cpu", "--port", str(port),
               "--num-threads", "1", "--num-kv-blocks", "256", "--voices-dir", str(tmp_path)]
    aiff = CUSTOM_ORDER_7_1["aiff-pcm"]
    uploads = [  # name, file, what it must be answered
        ("Eight", wav_of(channels_of(8, 1.5, 48000), 48000), "wav", {201}),
        ("Twelve", wav_of(channels_of(12, 1.5, 48000), 48000), "wav", {400}),
        ("Many", wav_of(channels_of(255, 0.5, 16000), 16000), "wav", {400}),
        ("Aiff", encoded(aiff[0], aiff[1], channels_of(8, 2.0, 48000), 48000), "aiff", {201, 400}),
    ]
    with ServerProcess("chorus-serve", command, port, "/ready", startup_timeout_s=300) as server:
        url = server.base_url
        with np.load(GOLDEN) as golden:
            warm = post_voice(url, "Warm", wav_bytes(np.tile(golden["base_clip"], 2)), "warm.wav")
        assert warm.status_code == 201, warm.text  # and the model's encoders are loaded
        (api,) = decoder_parents(server.pid)  # its spares are waiting
        speech = Speech(url)
        speech.start()
        assert speech.started.wait(60) and speech.status == 200 and speech.is_alive()
        crashes = 0
        for name, data, kind, statuses in uploads:
            started = time.monotonic()
            answer = post_voice(url, name, data, f"{name}.{kind}")
            elapsed = time.monotonic() - started
            crashes += name == "Aiff" and answer.status_code == 400
            assert elapsed < 1.0, (name, elapsed)
            assert answer.status_code in statuses, answer.text
            if answer.status_code == 400:
                assert answer.json()["error"]["param"] == "audio", answer.text
                assert ("at most 8 (7.1)" in answer.json()["error"]["message"]) == (name != "Aiff"), answer.text
            assert httpx.get(url + "/health", timeout=5).status_code == 200
        answered = time.monotonic()
        speech.listened.set()
        speech.join(120)
        assert not speech.is_alive()
        assert speech.events[-1][1]["type"] == "speech.audio.done"  # whole, no error event
        assert speech.events[-1][0] > answered  # it was still streaming when the last upload was answered
        assert httpx.get(url + "/health", timeout=5).status_code == 200
        assert decoder_parents(server.pid) == {api}  # the same API process, its spares started again
        stored = {v["name"] for v in httpx.get(url + VOICES, timeout=5).json()["data"][0]["stored"]}
        assert {"Warm", "Eight"} <= stored and not {"Twelve", "Many"} & stored
        metrics = httpx.get(url + "/metrics", timeout=5).text
        assert f'chorus_clip_decoder_failures_total{{cause="crashed"}} {crashes:.1f}' in metrics
        assert server.log_tail(400).count("clip decoder (pid") == crashes  # logged, with its signal
