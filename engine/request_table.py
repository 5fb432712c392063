"""The engine's requests, and the one place that changes them after a step."""
from __future__ import annotations

import logging
from typing import Iterable, Mapping, Sequence

import numpy as np

from engine.audio.decoder import StreamChunk
from engine.audio.stage import AudioStage
from engine.errors import RequestRejected
from engine.outputs import AudioChunk, EngineStats
from engine.request import Request
from engine.runner.model_runner import StepResult
from memory.state_slots import NoFreeSlot
from model.families.base import SpeechFamily, StreamState
from scheduler.output import SchedulerOutput
from scheduler.scheduler import QueueFullError, Scheduler

logger = logging.getLogger("chorus.engine")


class RequestTable:
    """The started requests by id, in the order they started.

    Invariants: this is the only writer of a request's state (its counts through the scheduler,
    its stop, error or abort, its listener, its follow link, its release); every request in it
    is open in the scheduler and the audio stage until its sequence ends, and leaves the table
    with exactly one finished `AudioChunk`, after all its audio, when its stream is released; a
    request that follows another plays after that one's audio (`plays_after`), as it stands at
    the end of every step.
    """

    def __init__(self, family: SpeechFamily, scheduler: Scheduler, audio: AudioStage, stats: EngineStats,
                 sample_rate: int, context_tokens: int) -> None:
        self.family = family
        self.context_tokens = context_tokens
        self.scheduler = scheduler
        self.audio = audio
        self.stats = stats
        self.sample_rate = sample_rate
        self._requests: dict[str, Request] = {}
        self._aborted: list[str] = []  # ended since the last step; each gets one final chunk

    def __contains__(self, request_id: str) -> bool:
        return request_id in self._requests

    def __len__(self) -> int:
        return len(self._requests)

    def get(self, request_id: str) -> Request | None:
        return self._requests.get(request_id)

    def values(self) -> Iterable[Request]:
        return self._requests.values()

    @property
    def has_work_besides_steps(self) -> bool:
        """Work for the next step other than the scheduler's (whose sequences that take steps
        say for themselves when they need one): an abort or an end to deliver, audio to drain."""
        # NOTE: paused requests and those awaiting their text alone are no work (once the audio
        # they made is out): the loop then waits for a command instead of spinning through empty
        # steps.
        return bool(self._aborted) or any(r.finish_reason is not None or self.audio.is_draining(r.request_id)
                                          for r in self._requests.values())

    def generating(self) -> list[Request]:
        """The requests still generating, but the paused (their clients are behind); those
        awaiting their text count: they hold their room and go on when it comes."""
        return [r for r in self._requests.values() if r.finish_reason is None and not r.seq.paused]

    def streams_of(self, scheduled: SchedulerOutput) -> dict[str, StreamState]:
        return {c.seq.request_id: self._requests[c.seq.request_id].stream for c in scheduled.chunks}

    # ---- between steps: the engine's commands -----------------------------------------------

    def start(self, request: Request) -> None:
        """Hands an admitted request to the audio stage (its codec primed by the prompt's codec
        prefix, if it has one) and the scheduler; raises RequestRejected if the codec's state
        slots are all taken (admission waits for one, but a continuation or an engine without
        admission does not), its codec prefix cannot be decoded, or the scheduler's queue is full
        (nothing is kept then)."""
        prefix = request.stream.prompt.codec_prefix
        try:
            self.audio.open(request.request_id, request.listener, prefix)
        except NoFreeSlot as exc:
            raise RequestRejected(f"no room for another stream's codec state: {exc}", "overloaded",
                                  self.audio.seconds_until_free_slot()) from exc
        except ValueError as exc:
            if prefix is None:
                raise  # not the prompt's fault
            raise RequestRejected(f"the prompt's codec prefix cannot be decoded: {exc}", "invalid_prompt") from exc
        try:
            self.scheduler.add(request.seq)
        except QueueFullError as exc:
            self.audio.discard(request.request_id)
            raise RequestRejected(str(exc), "queue_full") from exc
        self._requests[request.request_id] = request
        if request.follows is not None:
            # NOTE: the rest of the speech is this request's to project now; counted on both, the
            # projection would see one listener as two streams for as long as both generate.
            request.follows.outputs_after = 0
            self._follow(request)

    def end_queued(self, request: Request) -> None:
        """A request withdrawn from admission's queue ends like any other: one final chunk."""
        self._requests[request.request_id] = request
        self.abort(request.request_id)

    def abort(self, request_id: str) -> None:
        """Ends a request now: frees its blocks, drops its pending audio; unknown or already
        ended by an abort or error: no-op."""
        request = self._requests.get(request_id)
        if request is None or request.finish_reason in ("abort", "error"):
            return
        self.scheduler.finish(request_id)
        self.audio.discard(request_id)
        request.finish_reason = request.finish_reason or "abort"
        self._aborted.append(request_id)

    def extend_text(self, request: Request, text_ids: Sequence[int], final: bool, max_tokens: int | None) -> None:
        """More live text for a request (started or queued), and the output budget of its text
        so far (`max_tokens`, unless None), to which each filler it read adds one; a request that
        cannot take the text fails."""
        try:
            self.family.extend_text(request.stream, text_ids, final)
        except ValueError as exc:
            if request.request_id in self._requests:
                self._fail(request.request_id, exc)
                return
            raise
        if max_tokens is not None:
            self._budget(request, max_tokens + request.fillers)
        self._await_input(request)

    def _budget(self, request: Request, max_tokens: int) -> None:
        """Sets a request's output budget: within the context, never below one more output."""
        seq = request.seq
        seq.max_output_tokens = max(seq.num_output_tokens + 1, min(max_tokens, self.context_tokens - seq.num_prompt_tokens))

    def _await_input(self, request: Request) -> None:
        """A stream that has read all the live text it was given stops taking steps, and the
        audio it made leaves now instead of when its listener runs low."""
        awaiting = self.family.needs_input(request.stream)
        if awaiting and not request.seq.awaiting_input and request.request_id in self._requests:
            self.audio.drain(request.request_id)
        request.seq.awaiting_input = awaiting

    def fill_starved(self, now: float, low_slack: float) -> None:
        """Streams awaiting their text whose listener has heard nothing yet, or holds at most
        `low_slack` seconds, read a filler and take a step (SpeechFamily.fill_input): the model
        speaks on what it has read, so text that comes slower than it reads leaves no gap."""
        for request in self._fillable():
            slack = request.listener.slack(now)
            if slack is None or slack <= low_slack:
                # NOTE: a filler's frame is not the text's: it does not count against the budget.
                self.family.fill_input(request.stream)
                request.fillers += 1
                self._budget(request, request.seq.max_output_tokens + 1)
                self._await_input(request)

    def seconds_until_fill(self, now: float, low_slack: float) -> float:
        """How long until `fill_starved` fills a stream (0: now; inf: none waits that may)."""
        soonest = float("inf")
        for request in self._fillable():
            slack = request.listener.slack(now)
            soonest = min(soonest, 0.0 if slack is None else max(0.0, slack - low_slack))
        return soonest

    def _fillable(self) -> Iterable[Request]:
        return (r for r in self._requests.values() if r.seq.awaiting_input and not r.seq.paused
                and r.finish_reason is None and self.family.can_fill_input(r.stream))

    def pause(self, request_id: str, paused: bool) -> None:
        request = self._requests.get(request_id)
        if request is not None:
            request.seq.paused = paused

    # ---- after a step ------------------------------------------------------------------------

    def record_outputs(self, scheduled: SchedulerOutput, result: StepResult, now: float) -> None:
        """The model ran `scheduled`: the family accepts each output (its frames go to the audio
        stage), failed requests end, and the scheduler counts the outputs and ends the
        sequences that stopped or reached their limit."""
        for chunk in scheduled.chunks:
            request = self._requests[chunk.seq.request_id]
            request.first_scheduled = request.first_scheduled or now
            self.stats.prompt_tokens_computed += max(0, min(chunk.end, chunk.seq.num_prompt_tokens) - chunk.start)
        for request_id, exc in result.failures.items():
            self._fail(request_id, exc)
        stopped = {rid for rid, output in result.outputs.items() if self._accept(self._requests[rid], output)}
        for request_id, reason in self.scheduler.update_from_output(scheduled, stopped).items():
            request = self._requests[request_id]
            request.finish_reason = reason
            self.audio.finish(request_id)

    def record_audio(self, ready: Mapping[str, StreamChunk], failures: Mapping[str, Exception],
                     now: float) -> list[AudioChunk]:
        """The audio stage's chunks left at `now`: each listener has received its audio, failed
        streams end, and requests whose last audio is out leave (released). Returns the chunks
        to send, each request's in order, a finished request's last."""
        for request_id, exc in failures.items():
            self._fail(request_id, exc)
        emitted = []
        for request_id, chunk in ready.items():
            request = self._requests[request_id]
            request.listener.received(len(chunk.pcm), now)
            self.stats.audio_seconds_generated += len(chunk.pcm) / self.sample_rate
            emitted.append(self._chunk(request, chunk.pcm, chunk.is_last, now))
        for request_id in self._aborted:
            emitted.append(self._chunk(self._requests[request_id], np.zeros(0, np.float32), True, now))
        self._aborted.clear()
        for request in self._requests.values():
            self._follow(request)
        return emitted

    def _accept(self, request: Request, output) -> bool:
        """Hands one output to the family and its frames to the audio stage; True when the family
        ended the stream. A failure ends the request instead (the scheduler then skips it)."""
        try:
            update = self.family.accept(request.stream, output)
            self.stats.tokens_generated += 1
            if update.frames is not None:
                self.audio.push(request.request_id, update.frames)
            if not update.finished:
                self._await_input(request)
        except Exception as exc:  # noqa: BLE001 - one request's failure must not end the step
            self._fail(request.request_id, exc)
            return False
        return update.finished

    def _fail(self, request_id: str, exc: Exception) -> None:
        logger.warning("request %s failed: %r", request_id, exc, exc_info=exc)
        request = self._requests[request_id]
        request.error = f"{type(exc).__name__}: {exc}"
        self.abort(request_id)
        request.finish_reason = "error"

    def _follow(self, request: Request) -> None:
        """A later segment's listener plays it only once the audio before it has run out: its
        playback (and so its slack) starts no sooner, and its first audio is due by then.
        Predecessors come first in the table (they started earlier), so theirs is already current."""
        before = request.follows
        if before is None or (plays_after := before.listener.runs_dry_at) is None:
            return
        listener = request.listener
        listener.plays_after = plays_after
        if listener.first_audio_at is None:
            # NOTE: never sooner than a new speech's: that moment counts only the earlier
            # segment's audio out so far (most of it is still to come when this one starts).
            listener.first_audio_due = max(listener.first_audio_due, plays_after)
        if before.request_id not in self._requests:  # all its audio is out: the moment is final
            request.follows = None

    def _chunk(self, request: Request, pcm: np.ndarray, last: bool, now: float) -> AudioChunk:
        if not last:
            return AudioChunk(request.request_id, pcm, self.sample_rate)
        del self._requests[request.request_id]
        self.family.release(request.stream)
        reason = request.finish_reason or "stop"
        self.stats.finished_by_reason[reason] = self.stats.finished_by_reason.get(reason, 0) + 1
        return AudioChunk(request.request_id, pcm, self.sample_rate, finished=True, finish_reason=reason,
                          error=request.error, metrics=request.metrics(now))
