"""Which API's error shape a request is answered in when a middleware refuses it before its
route runs: Deepgram's on its /v1/speak routes (REST and the WebSocket's handshake), OpenAI's
everywhere else."""
from __future__ import annotations

import uuid

from starlette.responses import Response

from api.deepgram.errors import DeepgramError
from api.openai.errors import ApiError, error_response
from api.speech.errors import SpeechError


# Deepgram's routes (REST and socket) answer a refusal in Deepgram's error shape.
DEEPGRAM_PREFIX = "/v1/speak"


def speaks_deepgram(path: str) -> bool:
    """Whether the route at `path` answers errors in Deepgram's shape."""
    return path.startswith(DEEPGRAM_PREFIX)


def refusal(path: str, status: int, message: str, code: str, deepgram_code: str, param: str | None = None,
            headers: dict[str, str] | None = None) -> Response:
    """The error response to a request for `path`: `code` (and `param`) in OpenAI's shape,
    `deepgram_code` in Deepgram's (with a request id of its own, as the route would give)."""
    if speaks_deepgram(path):
        return DeepgramError(status, deepgram_code, message, headers).response(str(uuid.uuid4()))
    return error_response(status, message, code, param, headers)


def speech_refusal(path: str, error: SpeechError) -> Response:
    """`error` (a speech that cannot start) answered for `path` as its route answers it: its
    codes and Retry-After as `ApiError.of` or `DeepgramError.of` give them."""
    if speaks_deepgram(path):
        return DeepgramError.of(error).response(str(uuid.uuid4()))
    return ApiError.of(error).response()
