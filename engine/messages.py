"""Messages between the API process and the engine core (picklable, small)."""
from __future__ import annotations

from dataclasses import dataclass

from engine.errors import RequestRejected
from engine.outputs import EngineLimits, EngineStats
from model.families.base import SpeechPrompt
from model.sampling import SamplingParams


@dataclass(slots=True)
class AddRequest:
    request_id: str
    prompt: SpeechPrompt
    params: SamplingParams
    priority: int = 0
    # A later segment of a speech whose first segment was admitted: it bypasses admission.
    continuation: bool = False
    # Outputs the rest of its speech is expected to take after this request (its later segments).
    outputs_after: int = 0
    # The request whose audio its listener hears right before this one's (the previous segment).
    follows: str | None = None
    # When its speech reached the server (monotonic seconds, this machine's clock): its first-audio
    # deadline counts from then, not from when its prompt was ready (None: from its arrival here).
    arrived: float | None = None


@dataclass(slots=True)
class AbortRequest:
    request_id: str


@dataclass(slots=True)
class PauseRequest:
    """Backpressure: `paused` stops the request's generation (its blocks kept), False resumes it."""

    request_id: str
    paused: bool


@dataclass(slots=True)
class ExtendText:
    """More of a live request's text (ids from its front end's `live_text_ids`); `final`: the last."""

    request_id: str
    text_ids: list[int]
    final: bool = False
    # The output budget of the request's text so far (the fillers it reads come on top); None:
    # unchanged.
    max_tokens: int | None = None


@dataclass(slots=True)
class Shutdown:
    pass


@dataclass(slots=True)
class Rejected:
    """The core refused a request at admission (see engine.errors.RequestRejected)."""

    request_id: str
    message: str
    code: str
    retry_after: float | None = None

    @classmethod
    def of(cls, request_id: str, exc: RequestRejected) -> Rejected:
        return cls(request_id, str(exc), exc.code, exc.retry_after)


@dataclass(slots=True)
class StatsUpdate:
    stats: EngineStats


@dataclass(slots=True)
class CoreReady:
    sample_rate: int
    limits: EngineLimits
    stats: EngineStats


@dataclass(slots=True)
class CoreFailed:
    """The core loop died; every open request is lost."""

    message: str
