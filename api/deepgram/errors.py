"""Deepgram's error shapes: REST `{"err_code", "err_msg", "request_id"}` (with `dg-request-id`
and `dg-error` headers), and the WebSocket's Warning and Error messages; and the speech
pipeline's errors (api/speech/errors.py) rendered in them."""
from __future__ import annotations

import re

from fastapi.responses import JSONResponse

from api.speech.errors import (BUSY_CODES, ENGINE_DEAD, INVALID_SSML, SPEECH_TOO_LONG, UNSPEAKABLE, SpeechError,
                               outcome_of)

_ERR_CODE = re.compile(r"[A-Z][A-Z0-9_]*")
# Deepgram's err_code for a speech error's code, where it is not that code in upper case. A
# timestamps error (invalid_value, unsupported_value) is about a query parameter: Deepgram's
# routes take no other field those codes could name.
_ERR_CODES = {**dict.fromkeys(BUSY_CODES, "TOO_MANY_REQUESTS"), "invalid_value": "INVALID_QUERY_PARAMETER",
              "unsupported_value": "INVALID_QUERY_PARAMETER", "voice_not_found": "UNKNOWN_MODEL"}


class DeepgramError(Exception):
    """An error answer of the speak API: HTTP status and Deepgram's err_code / err_msg.
    Invariant: its headers hold nothing from the request: err_msg (which may quote the request)
    goes in the JSON body only, and `dg-error` is a fixed ASCII phrase made from err_code, a
    constant of this server's code. (A header value is Latin-1 without CR, LF or NUL: an echoed
    request value that breaks that is a 500, or a connection dropped with no answer.)"""

    def __init__(self, status: int, err_code: str, err_msg: str, headers: dict[str, str] | None = None) -> None:
        if not _ERR_CODE.fullmatch(err_code):
            raise ValueError(f"err_code must be an UPPER_SNAKE_CASE constant, got {err_code!r}")
        super().__init__(err_msg)
        self.status, self.err_code, self.err_msg = status, err_code, err_msg
        self.headers = headers or {}

    @property
    def summary(self) -> str:
        """What `dg-error` says: err_code in words ("INVALID_QUERY_PARAMETER" → "Invalid query
        parameter")."""
        return self.err_code.replace("_", " ").capitalize()

    @classmethod
    def of(cls, error: SpeechError) -> DeepgramError:
        """The speech pipeline's `error` as the speak API answers it: invalid SSML is INVALID_SSML,
        a text over the spoken budget SPEECH_TOO_LONG, anything else about the text (nothing in it
        to speak, or a prompt the engine refuses) INVALID_TEXT."""
        if error.code in (INVALID_SSML, SPEECH_TOO_LONG):
            return cls(400, error.code.upper(), error.message)
        if error.param == "input":
            return cls(400, "INVALID_TEXT", f"The text cannot be spoken: {error.reason}")
        headers = {} if error.retry_after is None else {"Retry-After": str(error.retry_after)}
        return cls(error.status, deepgram_code(error), error.message, headers)

    def response(self, request_id: str) -> JSONResponse:
        headers = {"dg-request-id": request_id, "dg-error": self.summary, **self.headers}
        return JSONResponse({"err_code": self.err_code, "err_msg": self.err_msg, "request_id": request_id},
                            status_code=self.status, headers=headers)


def warning_message(code: str, text: str) -> dict:
    """A WebSocket Warning, in both field sets Deepgram's SDKs read (4.x: warn_code / warn_msg;
    the docs and 7.x: code / description)."""
    return {"type": "Warning", "warn_code": code, "warn_msg": text, "code": code, "description": text}


def error_message(code: str, text: str) -> dict:
    """A WebSocket Error that leaves the connection open (the SDKs read description, message,
    variant); the text it concerned is dropped."""
    return {"type": "Error", "variant": code, "description": text, "message": text}


def deepgram_code(error: SpeechError) -> str:
    """Deepgram's err_code for a speech error."""
    return _ERR_CODES.get(error.code, error.code.upper())


def turn_refused(error: SpeechError) -> tuple[dict, str]:
    """The WebSocket message that tells the client why a turn's speech did not start, and the
    request outcome it counts as. A turn with nothing to speak is a Warning; an engine that died
    before its first audio is a synthesis that failed, as one that dies later is."""
    if error.code == ENGINE_DEAD:
        return error_message("SYNTHESIS_FAILED", f"The turn's audio stopped: {error.reason}"), "error"
    text = f"The turn's text was not spoken: {error.reason}"
    if error.code == UNSPEAKABLE:
        return warning_message("NOTHING_TO_SPEAK", text), "invalid"
    return error_message(deepgram_code(error), text), outcome_of(error.status)
