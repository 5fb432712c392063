"""Errors that end one request and say why, never the engine."""
from __future__ import annotations


class RequestRejected(ValueError):
    """A request the engine refuses at admission; `code` is machine-readable
    (`context_length_exceeded`, `queue_full`, `overloaded`, `duplicate_request_id`,
    `invalid_prompt`); `retry_after` is, for `overloaded`, the seconds until the engine expects
    to have room for it (None for the others)."""

    def __init__(self, message: str, code: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.retry_after = retry_after


class EngineDeadError(RuntimeError):
    """The engine core process is gone; no request can make progress."""
