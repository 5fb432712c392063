"""stream_format=sse parsed with httpx: deltas are the pcm stream, done carries usage."""
from __future__ import annotations

import base64
import json

import httpx

from tests.api.audio_check import SAMPLES_PER_FRAME
from tests.api.conftest import speech_body

TOKENS_PER_FRAME = 7  # Orpheus: one SNAC frame is 7 audio tokens


def read_events(server, auth, **body) -> list[dict]:
    events = []
    with httpx.stream(
        "POST", f"{server.url}/v1/audio/speech", json=speech_body(stream_format="sse", **body), headers=auth, timeout=60
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line.startswith("data:"):
                events.append(json.loads(line[len("data:"):]))
    return events


def test_sse_deltas_concatenate_to_the_pcm_stream(server, auth):
    pcm = httpx.post(f"{server.url}/v1/audio/speech", json=speech_body(seed=11), headers=auth, timeout=60).content
    events = read_events(server, auth, seed=11)
    deltas = [e for e in events if e["type"] == "speech.audio.delta"]
    assert len(deltas) > 1, "audio must arrive in several deltas, not one"
    assert b"".join(base64.b64decode(e["audio"]) for e in deltas) == pcm
    assert [e["type"] for e in events[len(deltas):]] == ["speech.audio.done"]
    usage = events[-1]["usage"]
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    assert usage["input_tokens"] > len("Hello there.")  # the voice prefix and markers count too
    # Every 7 audio tokens are one 2048-sample frame of the pcm.
    assert usage["output_tokens"] // TOKENS_PER_FRAME == len(pcm) // 2 // SAMPLES_PER_FRAME


def test_sse_carries_the_requested_format(server, auth):
    events = read_events(server, auth, response_format="wav")
    audio = b"".join(base64.b64decode(e["audio"]) for e in events if e["type"] == "speech.audio.delta")
    assert audio[:4] == b"RIFF" and audio[8:12] == b"WAVE"
    assert events[-1]["type"] == "speech.audio.done"
