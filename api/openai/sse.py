"""Server-sent events of a speech stream, in OpenAI's shape: `speech.audio.delta` events carry
base64 audio of the response format, one `speech.audio.done` carries the token usage. Asked for
(`"timestamps": "word"`, an extension), `speech.audio.timestamps` events carry words with their
start and end in seconds of the audio, each right after the delta its start is in."""
from __future__ import annotations

import base64
import json


def audio_delta(data: bytes) -> dict:
    return {"data": json.dumps({"type": "speech.audio.delta", "audio": base64.b64encode(data).decode("ascii")})}


def audio_timestamps(words: list[dict]) -> dict:
    return {"data": json.dumps({"type": "speech.audio.timestamps", "words": words})}


def audio_done(usage: dict[str, int]) -> dict:
    return {"data": json.dumps({"type": "speech.audio.done", "usage": usage})}


def stream_error(message: str) -> dict:
    """Sent instead of `done` when synthesis fails after the stream has started."""
    body = {"message": message, "type": "server_error", "param": None, "code": "synthesis_failed"}
    return {"data": json.dumps({"type": "error", "error": body})}
