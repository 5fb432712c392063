"""Deepgram's error shapes: REST `{"err_code", "err_msg", "request_id"}` (with `dg-request-id`
and `dg-error` headers), and the WebSocket's Warning and Error messages."""
from __future__ import annotations

from fastapi.responses import JSONResponse


class DeepgramError(Exception):
    """An error answer of the speak API: HTTP status and Deepgram's err_code / err_msg."""

    def __init__(self, status: int, err_code: str, err_msg: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(err_msg)
        self.status, self.err_code, self.err_msg = status, err_code, err_msg
        self.headers = headers or {}

    def response(self, request_id: str) -> JSONResponse:
        headers = {"dg-request-id": request_id, "dg-error": self.err_msg, **self.headers}
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
