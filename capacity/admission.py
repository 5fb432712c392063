"""Admission: a new request starts only when every admitted stream keeps its playback deadline.

Otherwise it waits, at most until its first audio is due (arrival + `max_queue_delay`), or is
refused at once, with the seconds until the engine expects room for it, when it could not start
in time. The projection is capacity/projection.py's; the step costs are the engine's measured
`StepCostModel`: the predicted steps plus how far runs of steps have usually overrun their
prediction (`overrun`: a plan that holds only for the mean step lets streams stall on every
slower one, and one that charges every step at its own tail, `predict_tail`, took the engine
for 1.6 times slower than it ran and refused streams it had room for); each stream's slack is
its `Listener`'s.
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Callable, Protocol

from capacity.config import CapacityConfig
from capacity.listener import Listener
from capacity.overrun import Overrun
from capacity.projection import StreamOutlook, all_keep_slack, realtime_capacity, start_delay, timeline_of
from capacity.room import Room
from capacity.step_cost import StepCostModel


class Candidate(Protocol):
    """A request as admission sees it (the engine's `Request`)."""

    request_id: str
    arrival: float
    # Outputs its speech's later segments are expected to take: admission commits to them too.
    outputs_after: int
    listener: Listener

    @property
    def prompt_tokens(self) -> int: ...

    @property
    def uncomputed_prompt_tokens(self) -> int: ...

    @property
    def max_outputs(self) -> int: ...

    @property
    def outputs(self) -> int: ...


class Overloaded(Exception):
    """A request refused for want of room; it could start in `retry_after` seconds."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


@dataclass(slots=True, eq=False)
class _Typical:
    """A stand-in request of the typical size (see TypicalRequest)."""

    prompt_tokens: int
    max_outputs: int
    arrival: float
    listener: Listener
    request_id: str = "typical"
    outputs_after: int = 0
    outputs: int = 0

    @property
    def uncomputed_prompt_tokens(self) -> int:
        return self.prompt_tokens


class TypicalRequest:
    """A running mean (exponentially weighted) of admitted requests' prompt tokens and outputs,
    and of how much of a new speech's first-audio budget is spent before its first request
    reaches the engine (`lead`: its prompt's preparation); and the sizes of the last RECENT
    admitted, whose lower quartile by outputs is the `short` stand-in. Invariant: the sizes are
    positive, the lead is >= 0."""

    WEIGHT = 0.1  # of each new request
    RECENT = 64
    SHORT_QUANTILE = 0.25

    def __init__(self, prompt_tokens: float = 100.0, outputs: float = 300.0) -> None:
        self.prompt_tokens, self.outputs = prompt_tokens, outputs
        self.lead = 0.0
        self._recent: deque[tuple[int, int]] = deque(maxlen=self.RECENT)  # (outputs, prompt tokens)

    def observe(self, request: Candidate, lead: float | None = None) -> None:
        """Counts an admitted request; `lead`: the seconds its speech had waited before it came
        (None: not a new speech's first request, which says nothing of that)."""
        w = self.WEIGHT
        prompt_tokens, outputs = max(1, request.prompt_tokens), max(1, request.max_outputs + request.outputs_after)
        self.prompt_tokens += w * (prompt_tokens - self.prompt_tokens)
        self.outputs += w * (outputs - self.outputs)
        self._recent.append((outputs, prompt_tokens))
        if lead is not None:
            self.lead += w * (max(0.0, lead) - self.lead)

    def request(self, now: float, max_queue_delay: float, short: bool = False) -> Candidate:
        """A stand-in request of the typical size (`short`: of the lower quartile of recent
        sizes by outputs, or the typical one before any came), reaching the engine `now` with a
        typical speech's budget left."""
        outputs, prompt_tokens = round(self.outputs), round(self.prompt_tokens)
        if short and self._recent:
            ranked = sorted(self._recent)
            outputs, prompt_tokens = ranked[int(self.SHORT_QUANTILE * (len(ranked) - 1))]
        return _Typical(prompt_tokens, outputs, now, Listener(first_audio_due=now + max_queue_delay - self.lead))


@dataclass(slots=True)
class AdmissionCounts:
    """Requests by decision since the engine started; only ever grow. A request that waited is
    counted as queued, and again as admitted or refused when its wait ends."""

    admitted: int = 0
    queued: int = 0
    refused: int = 0


class Admission:
    """Decides for each new request: start now, wait (arrival order), or be refused.

    Invariants: a request starts only if, with it, every committed stream's projected slack stays
    positive and it has its first audio by its deadline, except the one request an idle engine
    always starts; a committed stream is never put back or refused to make room; a queued request
    starts or is refused by the first step after it could no longer start in time; a
    continuation is never queued or refused. With `max_queue_delay` None, everything starts.
    """

    def __init__(self, config: CapacityConfig, max_num_seqs: int, step_cost: StepCostModel, step_audio: float,
                 first_audio_outputs: int, free_slots: Callable[[], int | None] = lambda: None) -> None:
        self.max_queue_delay = config.max_queue_delay
        self.room_limit = config.room_limit
        self.max_num_seqs = max_num_seqs
        # Streams that could open now for want of per-stream state (the codec's), None: no limit.
        # Slots free as streams finish playing out, which the projection does not follow: a
        # request without one waits in the queue (or is refused when it could not start in time).
        self.free_slots = free_slots
        self.step_cost = step_cost
        self.step_audio = step_audio
        self.first_audio_outputs = first_audio_outputs
        self.queue: list[Candidate] = []
        self.counts = AdmissionCounts()
        # A typical request (prompt tokens, outputs), learned from those admitted: what
        # `seconds_until_room` plans for, before anyone knows the next request's size.
        self.typical = TypicalRequest()

    def offer(self, request: Candidate, committed: list[StreamOutlook], now: float, continuation: bool) -> bool:
        """True: `request` starts now; False: it waits in the queue. Raises Overloaded (with
        `retry_after`) when it could not start in time."""
        bypasses = continuation or self.max_queue_delay is None
        if bypasses or (not self.queue and self._starts_now(committed, [request], now)):
            self.counts.admitted += 1
            self.typical.observe(request, None if bypasses else self._lead(request))
            return True
        if not self._in_time(committed, [request], now):
            raise self._refusal(committed, self.queue + [request], now)
        self.queue.append(request)
        self.counts.queued += 1
        return False

    def poll(self, committed: list[StreamOutlook],
             now: float) -> tuple[list[Candidate], list[tuple[Candidate, Overloaded]]]:
        """The queued requests that start now (arrival order), and those refused now."""
        started: list[Candidate] = []
        while self.queue and self._starts_now(committed, started + self.queue[:1], now):
            started.append(self.queue.pop(0))
        self.counts.admitted += len(started)
        for request in started:
            self.typical.observe(request, self._lead(request))
        running = len(committed) + len(started)
        late = [r for r in self.queue if self._first_audio_after(r, running, now) > r.listener.first_audio_due]
        refused = [(r, self._refusal(committed, [r], now)) for r in late]
        self.queue = [r for r in self.queue if r not in late]
        return started, refused

    def is_queued(self, request_id: str) -> bool:
        return any(request.request_id == request_id for request in self.queue)

    def withdraw(self, request_id: str) -> Candidate | None:
        """Takes a queued request out (its client left); None if it is not queued."""
        for request in self.queue:
            if request.request_id == request_id:
                self.queue.remove(request)
                return request
        return None

    def outlook(self, request: Candidate, pending_seconds: float, now: float) -> StreamOutlook:
        """A committed request as the projection sees it (`pending_seconds`: audio whose frames
        exist but that has not left yet, the audio stage's)."""
        remaining = request.max_outputs - request.outputs + request.outputs_after
        prefill = self._prefill_seconds(max(0, request.uncomputed_prompt_tokens))
        slack = request.listener.slack(now)
        if slack is not None:
            # NOTE: a listener that has run dry waits for the next audio and plays on from there,
            # so the future starts it from nothing rather than from its (negative) slack.
            return StreamOutlook(max(0.0, slack) + pending_seconds, remaining, prefill_seconds=prefill)
        # Past its first audio's due time it is late whatever happens; it only has to start at all.
        left = request.listener.first_audio_due - now
        first_audio_steps = max(1, self.first_audio_outputs - request.outputs)
        return StreamOutlook(left if left > 0 else math.inf, remaining, first_audio_steps, prefill, request.outputs)

    def seconds_until_room(self, committed: list[StreamOutlook], now: float) -> float:
        """Seconds until a typical new request could start with its first audio in time (0: now),
        as its refusal would say; what the API tells clients it refuses before preparing them."""
        if self.max_queue_delay is None:
            return 0.0
        newcomer = self.typical.request(now, self.max_queue_delay)
        fits = lambda running, at: self._fits(running, self.queue + [newcomer], now + at, fresh=True)  # noqa: E731
        overrun = self._overrun(len(committed) + len(self.queue) + 1)
        delay = start_delay(committed, fits, self.step_cost.predict, self.step_audio, overrun)
        return timeline_of(committed, self.step_cost.predict, self.step_audio, overrun).end if delay is None else delay

    def room_now(self, committed: list[StreamOutlook], now: float) -> int:
        """Room now: how many typical new requests (at most `room_limit`) could start now, one
        after another, each keeping every stream's deadlines (0 while the queue holds anyone:
        they go first)."""
        free = self.free_slots()
        room = min(self.room_limit, self.max_num_seqs - len(committed), self.room_limit if free is None else free)
        if self.max_queue_delay is None or room <= 0:
            return max(0, room)
        if self.queue:
            return 0
        newcomers: list[Candidate] = []
        while len(newcomers) < room:
            candidate = self.typical.request(now, self.max_queue_delay)
            if not self._starts_now(committed, newcomers + [candidate], now):
                break
            newcomers.append(candidate)
        return len(newcomers)

    def room_in_time(self, committed: list[StreamOutlook], now: float, short: bool = False) -> int:
        """Room in time: how many typical new requests (`short`: short ones, TypicalRequest's) (at
        most `room_limit`) arriving now would all start by their first-audio deadlines, at once
        or after waiting behind the queue: what `offer` would admit or queue rather than refuse
        (at least `room_now`'s count)."""
        if self.max_queue_delay is None:
            return max(0, min(self.room_limit, self.max_num_seqs - len(committed)))
        low, high = 0, self.room_limit  # `low` requests are known to make it; more never start sooner
        while low < high:
            mid = (low + high + 1) // 2
            newcomers = [self.typical.request(now, self.max_queue_delay, short) for _ in range(mid)]
            if self._in_time(committed, newcomers, now):
                low = mid
            else:
                high = mid - 1
        return low

    def realtime_capacity(self) -> int:
        """Streams the engine can step faster than real time, as its step costs stand now (the
        predicted ones: a run of steps averages out to them)."""
        return realtime_capacity(self.step_cost.predict, self.step_audio, self.max_num_seqs)

    def room(self, committed: list[StreamOutlook], now: float) -> Room:
        """The room figures the engine publishes (each a projection over every stream: the engine
        takes them a few times a second, not every step)."""
        room_now = self.room_now(committed, now)
        # NOTE: with room now for as many as it counts, waiting adds none.
        in_time = room_now if room_now == self.room_limit else max(room_now, self.room_in_time(committed, now))
        short = in_time if in_time == self.room_limit else max(in_time, self.room_in_time(committed, now, short=True))
        until = 0.0 if room_now else self.seconds_until_room(committed, now)
        return Room(room_now, in_time, until, now, short)

    # ---- helpers ---------------------------------------------------------------------------

    def _lead(self, request: Candidate) -> float:
        """How much of its first-audio budget `request`'s speech had spent when it came."""
        return request.arrival + self.max_queue_delay - request.listener.first_audio_due

    def _overrun(self, streams: int) -> Overrun:
        # NOTE: scaled by a step of all of them: steps only get cheaper as streams end.
        return self.step_cost.overrun(streams)

    def _prefill_seconds(self, tokens: int) -> float:
        # NOTE: at the mean rate: the overrun is the scatter of whole steps (the codec's, as
        # streams are fed), and it covers the steps the prompt rides on already.
        return self.step_cost.prefill_seconds(tokens)

    def _starts_now(self, committed: list[StreamOutlook], newcomers: list[Candidate], now: float) -> bool:
        free = self.free_slots()
        if free is not None and len(newcomers) > free:
            return False
        # NOTE: an idle engine starts anything: waiting cannot make it start any sooner.
        return (not committed and len(newcomers) == 1) or self._fits(committed, newcomers, now)

    def _in_time(self, committed: list[StreamOutlook], newcomers: list[Candidate], now: float) -> bool:
        """Whether the queue and then `newcomers` could all start by their deadlines."""
        waiting = self.queue + newcomers
        fits = lambda running, at: self._fits(running, waiting, now + at)  # noqa: E731
        overrun = self._overrun(len(committed) + len(waiting))
        return start_delay(committed, fits, self.step_cost.predict, self.step_audio, overrun) is not None

    def _fits(self, running: list[StreamOutlook], newcomers: list[Candidate], now: float,
              fresh: bool = False) -> bool:
        """Whether `newcomers` can start at `now` next to `running` (fresh: each judged with a
        whole `max_queue_delay` ahead of it, as if it arrived at `now`)."""
        if len(running) + len(newcomers) > self.max_num_seqs:
            return False
        streams = running + [self._newcomer(r, now, fresh) for r in newcomers]
        # NOTE: a listener must hold a slow step's audio beyond the projection's: its audio leaves
        # in windows, after a step, not the instant its frames exist.
        margin = self.step_cost.predict_tail(len(streams))
        return all_keep_slack(streams, self.step_cost.predict, self.step_audio, margin, self._overrun(len(streams)))

    def _newcomer(self, request: Candidate, now: float, fresh: bool) -> StreamOutlook:
        left = self.max_queue_delay if fresh else request.listener.first_audio_due - now
        prefill = self._prefill_seconds(request.prompt_tokens)
        return StreamOutlook(left, request.max_outputs + request.outputs_after, self.first_audio_outputs,
                             prefill)

    def _first_audio_after(self, request: Candidate, running: int, now: float) -> float:
        """When `request`'s first audio would come if it started now next to `running` streams."""
        steps = self.first_audio_outputs * self.step_cost.predict(running + 1)
        steps += self._overrun(running + 1)(self.first_audio_outputs)
        return now + self._prefill_seconds(request.prompt_tokens) + steps

    def _refusal(self, committed: list[StreamOutlook], newcomers: list[Candidate], now: float) -> Overloaded:
        """The refusal of the last of `newcomers`; its retry_after is when they could all start
        had they arrived then, or failing that, when every committed stream will have ended."""
        overrun = self._overrun(len(committed) + len(newcomers))
        retry_after = start_delay(committed, lambda running, at: self._fits(running, newcomers, now + at, fresh=True),
                                  self.step_cost.predict, self.step_audio, overrun)
        if retry_after is None:
            retry_after = timeline_of(committed, self.step_cost.predict, self.step_audio, overrun).end
        self.counts.refused += 1
        return Overloaded(
            f"the engine is at its real-time capacity ({len(committed)} streams); retry in {retry_after:.1f} s",
            retry_after,
        )
