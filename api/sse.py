"""Server-sent events of a speech stream, in OpenAI's shape: `speech.audio.delta` events carry
base64 audio of the response format, one `speech.audio.done` carries the token usage."""
from __future__ import annotations

import base64
import json


def audio_delta(data: bytes) -> dict:
    return {"data": json.dumps({"type": "speech.audio.delta", "audio": base64.b64encode(data).decode("ascii")})}


def audio_done(usage: dict[str, int]) -> dict:
    return {"data": json.dumps({"type": "speech.audio.done", "usage": usage})}


def stream_error(message: str) -> dict:
    """Sent instead of `done` when synthesis fails after the stream has started."""
    body = {"message": message, "type": "server_error", "param": None, "code": "synthesis_failed"}
    return {"data": json.dumps({"type": "error", "error": body})}
