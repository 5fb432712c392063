"""Starting a speech, as every protocol does it: the engine's readiness, the refusals that come
before any preparation (a shutdown drain, an engine with no room: api/speech/early_refusal.py),
then the first segment prepared and opened. A speech that cannot start raises SpeechError
(api/speech/errors.py) for the caller to answer in its protocol's shape."""
from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Callable, Iterator, Protocol

from api.config.settings import ApiSettings
from api.http.draining import Drain
from api.speech.early_refusal import EarlyRefusal
from api.speech.errors import ENGINE_NOT_READY, SpeechError, speech_error
from api.speech.markup import speech_parts
from api.speech.planning import SegmentPlanner
from api.speech.synthesis import SegmentedSynthesis
from api.speech.voice_choice import VoiceChoice
from engine.client import EngineClient
from model.text.lexicon import Lexicon


class SpeechServices(Protocol):
    """What starting a speech uses: the app's state (api/app.py sets each of these on it), or
    `chorus say`'s own for its one speech."""

    engine: EngineClient
    planner: SegmentPlanner
    settings: ApiSettings
    drain: Drain
    early_refusal: EarlyRefusal
    lexicon: Lexicon  # the server's pronunciations (--lexicon; empty without)


def check_ready(engine: EngineClient) -> None:
    """Raises SpeechError (503) until the engine has loaded its model and is stepping."""
    if not engine.is_ready:
        raise SpeechError(503, ENGINE_NOT_READY, "The engine is not ready yet; retry shortly")


async def start_speech(services: SpeechServices, text: str, voice: VoiceChoice, speed: float,
                       seed: int | None = None, max_tokens: int | None = None,
                       lexicon: Lexicon | None = None) -> tuple[SegmentedSynthesis, float]:
    """Plans `text` (plain or SSML, api/speech/markup.py; `lexicon`'s pronunciations applied, by
    default the server's) and starts its synthesis in `voice` (Catalog.voice_choice): returns
    it, with its first audio on the way, and the speed the model speaks at (the audio pipeline
    stretches the rest of `speed`). Raises SpeechError when it cannot start (a drain, no room,
    invalid SSML or phonemes, more than the spoken budget, nothing to speak, the engine's refusal
    of its first segment, a voice, language or instructions the front end refuses, a dead
    engine); nothing is left running then. A full engine refuses it before its text is prepared;
    its first audio is due `max_queue_delay` after this call, its preparation included."""
    engine = services.engine
    arrived = time.monotonic()
    with _as_speech_error(services), _claim(services, continuation=False) as admitted:
        # The model speaks as close to `speed` as its rate control reaches; the pipeline stretches the rest.
        model_speed = engine.frontend.model_speed(speed)
        params = engine.frontend.default_sampling().replace(seed=seed)
        if max_tokens is not None:
            params = params.replace(max_tokens=max_tokens)
        parts = speech_parts(text, engine.frontend, services.lexicon if lexicon is None else lexicon, model_speed)
        segments = await services.planner.plan(parts, voice, model_speed, params, heard_speed=speed)
        settings = services.settings
        synthesis = SegmentedSynthesis(engine, segments, voice.name, model_speed, settings.client_backlog_seconds,
                                       settings.stalled_client_seconds, pause_stretch=speed / model_speed)
        services.drain.register(synthesis)
        try:
            await synthesis.start(arrived=arrived)
        except BaseException:
            synthesis.close()
            raise
        admitted(synthesis)
    return synthesis, model_speed


async def start_synthesis(services: SpeechServices, synthesis: SegmentedSynthesis, continuation: bool,
                          follows: str | None) -> None:
    """Starts `synthesis`, built and registered with the drain by the caller (a speak socket's
    turn), which closes it however it ends. `continuation`: its listener still plays the audio sent
    before it (that of engine request `follows`, when known), so it is admitted without question,
    as a speech's later segment is. Raises SpeechError when it cannot start."""
    with _as_speech_error(services), _claim(services, continuation) as admitted:
        await synthesis.start(continuation, follows)
        admitted(synthesis)


@contextmanager
def _claim(services: SpeechServices, continuation: bool) -> Iterator[Callable[[SegmentedSynthesis], None]]:
    """The refusals that come before anything of the speech is prepared (a drain; a full engine,
    unless `continuation`), then the speech's claim on the engine's room while the body prepares
    and opens its first segment (EarlyRefusal.claim): the body calls what it is given with the
    synthesis the engine admitted."""
    services.drain.check()
    with services.early_refusal.claim(None if continuation else services.engine.stats) as admitted:
        yield admitted


@contextmanager
def _as_speech_error(services: SpeechServices) -> Iterator[None]:
    """Raises what the body raises as a SpeechError, when it is an answer to the client."""
    try:
        yield
    except Exception as exc:
        error = speech_error(exc, services.settings.retry_after_seconds)
        if error is None:
            raise
        raise error from exc
