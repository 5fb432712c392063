"""The engine core: wires the scheduler, the model runner and the audio stage; one step at a time."""
from __future__ import annotations

import logging
import math
import time

import numpy as np

from engine.admission import ROOM_LIMIT, Admission, deadline_of
from engine.audio.stage import AudioStage
from engine.config import EngineConfig
from engine.errors import RequestRejected
from engine.outputs import AudioChunk, EngineLimits, EngineStats
from engine.request import Request
from engine.runner.model_runner import build_model_runner
from memory.block_hash import hash_full_blocks
from model.families.base import SpeechFamily, SpeechPrompt
from model.loader import load_family
from model.sampling import SamplingParams
from scheduler.deadlines import StreamOutlook
from scheduler.scheduler import QueueFullError, Scheduler
from scheduler.sequence import Sequence
from scheduler.step_cost import StepCostModel

logger = logging.getLogger("chorus.engine")


class EngineCore:
    """step() = admit queued requests → schedule → run the model (inputs, forward, sample) → the
    family accepts each output (frames to the audio stage) → the scheduler's one post-step update
    → audio → emit → each stream's deadline and the step's cost are recorded.

    Invariants: every added request either produces exactly one finished `AudioChunk`, after all
    of its audio, in order, or is refused once (raised by `add_request`, or later through
    `take_refusals` while it had no audio); an exception raised for one request ends that request
    only; a finished or aborted request holds no KV blocks.
    """

    def __init__(self, config: EngineConfig, family: SpeechFamily | None = None) -> None:
        self.config = config
        self.family = family or load_family(config.model)
        self.device = self.family.backbone.device
        self.runner = build_model_runner(self.family, config, self.device)
        self.kv_manager = self.runner.kv_manager
        self.step_cost = StepCostModel()
        self.scheduler = Scheduler(config.scheduler, self.kv_manager, self.step_cost)
        streaming = config.streaming.resolve(self.family.codec.window_hints)
        self.audio = AudioStage.build(
            self.family.codec, streaming, config.gpu, self.device, config.scheduler.max_num_seqs
        )
        self.sample_rate = self.family.codec.sample_rate
        self.requests: dict[str, Request] = {}
        self._aborted: list[str] = []  # aborted since the last step; each gets one final chunk
        self._refused: list[tuple[str, RequestRejected]] = []  # queued, then refused: not yet told
        self.stats = EngineStats(ready=True, kv_blocks_total=self.kv_manager.num_blocks)
        self.limits = EngineLimits(
            context_tokens=min(self.family.max_model_len, self.kv_manager.num_blocks * config.cache.block_size),
            outputs_per_second=self.family.outputs_per_second,
        )
        codec = self.family.codec
        frames_per_output = codec.sample_rate / codec.samples_per_frame / self.limits.outputs_per_second
        self.admission = Admission(
            config.scheduler, self.step_cost, 1.0 / self.limits.outputs_per_second,
            math.ceil((streaming.first_chunk_frames + streaming.first_lookahead_frames) / frames_per_output),
        )

    # ---- request lifecycle -----------------------------------------------------------------

    def add_request(
        self, request_id: str, prompt: SpeechPrompt, params: SamplingParams, priority: int = 0,
        continuation: bool = False, outputs_after: int = 0, follows: str | None = None,
        arrived: float | None = None,
    ) -> None:
        """Starts a request, queues it (admission), or raises RequestRejected; nothing else is
        affected either way. A `continuation` (a later segment of an admitted speech) starts.
        `outputs_after`: what the rest of its speech is expected to take after it, which
        admission commits to as well (the engine sees one segment of a speech at a time).
        `follows`: the request whose audio its listener hears right before this one's (the
        previous segment); its playback, deadlines and slack count from when that audio runs
        out, and it takes over that request's `outputs_after`. `arrived`: when its speech reached
        the server (monotonic); its first audio is due `max_queue_delay` after that, not after now."""
        if request_id in self.requests or self.admission.is_queued(request_id):
            raise RequestRejected(f"request id {request_id!r} is in use", "duplicate_request_id")
        prompt_len = len(prompt.token_ids)
        if prompt_len == 0:
            raise RequestRejected("the prompt is empty", "invalid_prompt")
        max_len = self.limits.context_tokens
        if prompt_len >= max_len:
            raise RequestRejected(
                f"the prompt is {prompt_len} tokens; this model accepts at most {max_len - 1} "
                "(shorten the input or split it)",
                "context_length_exceeded",
            )
        try:
            stream = self.family.new_stream(prompt, params)
        except ValueError as exc:  # a prompt this family cannot run: refuse it, keep the others going
            raise RequestRejected(str(exc), "invalid_prompt") from exc
        seq = Sequence(
            request_id=request_id,
            num_prompt_tokens=prompt_len,
            max_output_tokens=min(stream.max_outputs, max_len - prompt_len),
            priority=priority,
            prompt_block_hashes=self._prompt_block_hashes(prompt),
        )
        now = time.monotonic()
        delay = self.config.scheduler.max_queue_delay
        due_from = now if arrived is None else min(now, arrived)
        request = Request(request_id, seq, stream, arrival=now,
                          first_audio_deadline=math.inf if delay is None else due_from + delay,
                          outputs_after=max(0, outputs_after),
                          follows=self.requests.get(follows) if follows is not None else None)
        try:
            if self.admission.offer(request, self._committed(now), now, continuation):
                self._start(request)
        except RequestRejected:
            self.family.release(stream)
            raise
        if request.follows is not None:
            # NOTE: the rest of the speech is this request's to project now; counted on both, the
            # projection would see one listener as two streams for as long as both generate.
            request.follows.outputs_after = 0
            self._follow(request)

    def take_refusals(self) -> list[tuple[str, RequestRejected]]:
        """Queued requests refused since the last call (by id); they are gone from the engine."""
        refused, self._refused = self._refused, []
        return refused

    def _start(self, request: Request) -> None:
        """Hands an admitted request to the scheduler; raises RequestRejected if its queue is full."""
        try:
            self.scheduler.add(request.seq)
        except QueueFullError as exc:
            raise RequestRejected(str(exc), "queue_full") from exc
        request.seq.deadline = deadline_of(request, None)
        self.requests[request.request_id] = request
        self.audio.open(request.request_id)

    def _admit_queued(self, now: float) -> None:
        if not self.admission.queue:
            return
        started, refused = self.admission.poll(self._committed(now), now)
        for request in started:
            try:
                self._start(request)
            except RequestRejected as exc:
                refused.append((request, exc))
        for request, exc in refused:
            self.family.release(request.stream)
            self._refused.append((request.request_id, exc))

    def _committed(self, now: float) -> list[StreamOutlook]:
        """Every admitted stream still generating, as admission projects it (not the paused:
        their clients are behind, and they take no step until those catch up)."""
        return [
            self.admission.outlook(r, self.audio.playback(r.request_id), now)
            for r in self.requests.values() if r.finish_reason is None and not r.seq.paused
        ]

    def abort_request(self, request_id: str) -> None:
        """Ends a request now, frees its blocks, drops its pending audio; unknown ids: no-op."""
        queued = self.admission.withdraw(request_id)
        if queued is not None:
            self.requests[request_id] = queued  # it ends like any request: one final chunk
        request = self.requests.get(request_id)
        if request is None or request.finish_reason in ("abort", "error"):
            return
        self.scheduler.finish(request_id)
        self.audio.discard(request_id)
        request.finish_reason = request.finish_reason or "abort"
        self._aborted.append(request_id)

    def set_paused(self, request_id: str, paused: bool) -> None:
        """Backpressure from the API: a paused request keeps its blocks and its place but takes
        no step until resumed (frames it made still decode in steps others need); unknown ids:
        no-op."""
        request = self.requests.get(request_id)
        if request is not None:
            request.seq.paused = paused

    @property
    def has_work(self) -> bool:
        # NOTE: paused requests alone are no work: the loop then waits for a command instead of
        # spinning through empty steps.
        return bool(self.admission.queue or self._aborted
                    or any(not r.seq.paused or r.finish_reason is not None for r in self.requests.values()))

    # ---- one step --------------------------------------------------------------------------

    def step(self) -> list[AudioChunk]:
        started = time.perf_counter()
        self._admit_queued(time.monotonic())
        sched = self.scheduler.schedule(time.monotonic())
        streams = {c.seq.request_id: self.requests[c.seq.request_id].stream for c in sched.chunks}
        result = self.runner.execute(sched.chunks, streams)
        now = time.monotonic()
        for chunk in sched.chunks:
            request = self.requests[chunk.seq.request_id]
            request.first_scheduled = request.first_scheduled or now
            self.stats.prompt_tokens_computed += max(
                0, min(chunk.end, chunk.seq.num_prompt_tokens) - chunk.start
            )
        for request_id, exc in result.failures.items():
            self._fail(request_id, exc)
        stopped = {rid for rid, output in result.outputs.items() if self._accept(self.requests[rid], output)}
        for request_id, reason in self.scheduler.update_from_output(sched, stopped).items():
            self._finish(self.requests[request_id], reason)
        emitted = self._emit_audio()
        for request in self.requests.values():
            self._follow(request)
            request.seq.deadline = deadline_of(request, self.audio.playback(request.request_id))
        step_seconds = time.perf_counter() - started
        if sched.chunks:
            rows = sum(1 for c in sched.chunks if c.num_new_tokens == 1)
            self.step_cost.observe(rows, sched.num_batched_tokens - rows, step_seconds, result.forward_seconds)
        self._update_stats(step_seconds, result.forward_seconds)
        return emitted

    def _follow(self, request: Request) -> None:
        """A later segment's listener plays it only once the audio before it has run out: its
        playback (and so its slack) starts no sooner, and its first audio is due by then.
        Predecessors come first in `requests` (added earlier), so theirs is already current."""
        before = request.follows
        if before is None or (plays_after := before.runs_dry_at(self.sample_rate)) is None:
            return
        request.plays_after = plays_after
        self.audio.play_after(request.request_id, plays_after)
        if request.first_audio is None:
            # NOTE: never sooner than a new speech's: that moment counts only the earlier
            # segment's audio out so far (most of it is still to come when this one starts).
            request.first_audio_deadline = max(request.first_audio_deadline, plays_after)
        if before.request_id not in self.requests:  # all its audio is out: the moment is final
            request.follows = None

    def _accept(self, request: Request, output) -> bool:
        """Hands one output to the family and its frames to the codec; True when the family ended
        the stream. A failure ends the request instead (the scheduler then skips it)."""
        try:
            update = self.family.accept(request.stream, output)
            self.stats.tokens_generated += 1
            if update.frames is not None:
                self.audio.push(request.request_id, update.frames)
        except Exception as exc:  # noqa: BLE001 - one request's failure must not end the step
            self._fail(request.request_id, exc)
            return False
        return update.finished

    def _finish(self, request: Request, reason: str) -> None:
        """The scheduler has ended the request's sequence: its audio is flushed, then it ends."""
        request.finish_reason = reason
        self.audio.finish(request.request_id)

    def _fail(self, request_id: str, exc: Exception) -> None:
        logger.warning("request %s failed: %r", request_id, exc, exc_info=exc)
        request = self.requests[request_id]
        request.error = f"{type(exc).__name__}: {exc}"
        self.abort_request(request_id)
        request.finish_reason = "error"

    def _emit_audio(self) -> list[AudioChunk]:
        emitted = []
        started = time.perf_counter()
        ready = self.audio.step()
        self.stats.codec_seconds += time.perf_counter() - started
        for request_id, exc in self.audio.take_failures().items():
            self._fail(request_id, exc)
        for request_id, chunk in ready.items():
            request = self.requests[request_id]
            if len(chunk.pcm) and request.first_audio is None:
                request.first_audio = time.monotonic()
            request.samples_emitted += len(chunk.pcm)
            self.stats.audio_seconds_generated += len(chunk.pcm) / self.sample_rate
            emitted.append(self._chunk(request, chunk.pcm, chunk.is_last))
        for request_id in self._aborted:
            emitted.append(self._chunk(self.requests[request_id], np.zeros(0, np.float32), True))
        self._aborted.clear()
        return emitted

    def _chunk(self, request: Request, pcm: np.ndarray, last: bool) -> AudioChunk:
        if not last:
            return AudioChunk(request.request_id, pcm, self.sample_rate)
        del self.requests[request.request_id]
        self.family.release(request.stream)
        reason = request.finish_reason or "stop"
        self.stats.finished_by_reason[reason] = self.stats.finished_by_reason.get(reason, 0) + 1
        return AudioChunk(
            request.request_id,
            pcm,
            self.sample_rate,
            finished=True,
            finish_reason=reason,
            error=request.error,
            metrics=request.metrics(self.sample_rate, time.monotonic()),
        )

    def refresh_room_estimate(self) -> None:
        """Recomputes the stats' room for new requests (projections over every stream: not every step)."""
        now = time.monotonic()
        committed = self._committed(now)
        self.stats.room_streams = self.admission.room_now(committed, now)
        # NOTE: with room now for as many as it counts, waiting adds none.
        room = self.stats.room_streams
        self.stats.room_in_time = room if room == ROOM_LIMIT else max(room, self.admission.room_in_time(committed, now))
        self.stats.seconds_until_room = 0.0 if self.stats.room_streams else self.admission.seconds_until_room(committed, now)
        self.stats.taken_at = now

    def _prompt_block_hashes(self, prompt: SpeechPrompt) -> list[int]:
        if not self.config.cache.enable_prefix_caching:
            return []
        return hash_full_blocks(prompt.token_ids, self.config.cache.block_size, extra_key=prompt.cache_salt)

    def _update_stats(self, step_seconds: float, forward_seconds: float) -> None:
        s = self.stats
        s.steps += 1
        s.step_seconds += step_seconds
        s.forward_seconds += forward_seconds
        s.num_running = len(self.scheduler.running)
        s.num_waiting = len(self.scheduler.waiting)
        s.num_queued = len(self.admission.queue)
        counts = self.admission.counts
        s.requests_admitted, s.requests_queued, s.requests_refused = counts.admitted, counts.queued, counts.refused
        s.realtime_capacity = self.admission.capacity()
        s.predicted_step_seconds = self.step_cost.predict(s.num_running)
        s.kv_blocks_used = self.kv_manager.num_used_blocks
        hits = self.kv_manager.prefix_cache_stats
        s.prefix_cache_hit_rate = hits.hits / hits.queries if hits.queries else 0.0
