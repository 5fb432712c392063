"""Why a speech could not start, in no protocol's shape: the engine's refusals and failures, a
text with nothing to speak, an option the model cannot take (language, instructions), a shutdown
drain, an engine not ready yet. The OpenAI routes, the Deepgram REST route, the Deepgram socket
and `chorus say` each render a SpeechError their own way.
"""
from __future__ import annotations

import math

from api.http.draining import DRAIN_RETRY_AFTER_SECONDS, ShuttingDown
from api.speech.spoken_budget import SpeechTooLong
from api.speech.synthesis import SynthesisFailed
from api.speech.text_split import UnspeakableText
from engine.errors import EngineDeadError, RequestRejected
from model.families.base import LanguageNotSupported, OptionRefused, VoiceNotFoundError

# The codes of the errors raised here (besides the engine's own RequestRejected codes).
ENGINE_NOT_READY = "engine_not_ready"
ENGINE_DEAD = "engine_dead"
SHUTTING_DOWN = "shutting_down"
UNSPEAKABLE = "unspeakable_text"
SPEECH_TOO_LONG = "speech_too_long"  # over the spoken budget (api/speech/spoken_budget.py)
VOICE_NOT_FOUND = "voice_not_found"
INVALID_SSML = "invalid_ssml"  # api/speech/markup.py
INVALID_PRONUNCIATION = "invalid_pronunciation"
# The engine's refusals that a client should retry later (the others are about the text).
BUSY_CODES = ("overloaded", "queue_full")
# What ends a speech whose audio has already begun: too late for an error status, so each
# protocol says so in its stream.
STREAM_FAILURES = (SynthesisFailed, EngineDeadError)


class SpeechError(Exception):
    """A speech that cannot start, and why. Invariants: `status` is the HTTP status it is answered
    with (4xx: the request's fault, 429: busy, 503: the server cannot serve now); `code` is a
    lower_snake constant (one of this module's, or the engine's RequestRejected code); `message`
    is a sentence a client can read, `reason` what the underlying exception said; `retry_after`
    (whole seconds) is set exactly when a retry later may succeed and the server says when;
    `param` names the request field at fault, if one is."""

    def __init__(self, status: int, code: str, message: str, *, reason: str | None = None,
                 retry_after: int | None = None, param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
        self.reason = message if reason is None else reason
        self.retry_after, self.param = retry_after, param


def speech_error(exc: BaseException, default_retry_after: int) -> SpeechError | None:
    """`exc`, raised while a speech was being started, as a SpeechError; None for an exception
    that is no answer to the client (a bug, a cancellation: the caller lets it propagate).
    `default_retry_after`: the Retry-After of a busy refusal without an estimate of its own."""
    reason = str(exc)
    if isinstance(exc, ShuttingDown):
        return SpeechError(503, SHUTTING_DOWN, reason, retry_after=DRAIN_RETRY_AFTER_SECONDS)
    if isinstance(exc, RequestRejected):
        if exc.code in BUSY_CODES:
            return SpeechError(429, exc.code, f"The server is busy: {exc}", reason=reason,
                               retry_after=retry_after_seconds(exc, default_retry_after))
        return SpeechError(400, exc.code, reason, param="input")
    if isinstance(exc, SpeechTooLong):
        return SpeechError(400, SPEECH_TOO_LONG, f"The input is too long to speak: {exc}", reason=reason, param="input")
    if isinstance(exc, UnspeakableText):
        return SpeechError(400, UNSPEAKABLE, f"The text cannot be spoken: {exc}", reason=reason, param="input")
    if isinstance(exc, VoiceNotFoundError):
        return SpeechError(404, VOICE_NOT_FOUND, reason, param="voice")
    if isinstance(exc, OptionRefused):
        code = "unsupported_value" if isinstance(exc, LanguageNotSupported) else "invalid_value"
        return SpeechError(400, code, f"Invalid value for '{exc.param}': {exc}", reason=reason, param=exc.param)
    if isinstance(exc, EngineDeadError):
        return SpeechError(503, ENGINE_DEAD, "The engine has stopped; see the server log", reason=reason)
    return None


def retry_after_seconds(exc: RequestRejected, default: int) -> int:
    """The Retry-After of a refusal: the engine's own estimate when it has one (when its streams
    will have made room), rounded up to whole seconds, else `default`."""
    return default if exc.retry_after is None else max(1, math.ceil(exc.retry_after))


def outcome_of(status: int) -> str:
    """The `chorus_requests_total` outcome of a request answered with an error `status`."""
    return {429: "rejected", 503: "unavailable"}.get(status, "invalid" if status < 500 else "error")
