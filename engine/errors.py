"""Errors that end one request and say why, never the engine."""
from __future__ import annotations


class RequestRejected(ValueError):
    """A request the engine refuses at admission; `code` is machine-readable
    (`context_length_exceeded`, `queue_full`, `duplicate_request_id`, `invalid_prompt`)."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


class EngineDeadError(RuntimeError):
    """The engine core process is gone; no request can make progress."""
