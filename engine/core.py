"""The engine core: wires admission, the scheduler, the model runner, the audio stage and the
request table; one step at a time, on one clock."""
from __future__ import annotations

import math
import time
from typing import Callable

import torch

from capacity.admission import Admission, Overloaded
from capacity.listener import Listener
from capacity.projection import StreamOutlook
from capacity.step_cost import StepCostModel
from engine.audio.stage import AudioStage
from engine.config import EngineConfig
from engine.errors import RequestRejected
from engine.messages import AddRequest
from engine.outputs import AudioChunk, EngineLimits, EngineStats
from engine.request import Request
from engine.request_table import RequestTable
from engine.runner.model_runner import StepResult, build_model_runner
from memory.block_hash import hash_full_blocks
from model.families.base import SpeechFamily, SpeechPrompt
from model.loader import load_family
from model.sampling import SamplingParams
from scheduler.output import SchedulerOutput
from scheduler.scheduler import Scheduler
from scheduler.sequence import Sequence

Clock = Callable[[], float]


def make_current(device: torch.device) -> None:
    """Makes a GPU given with its index the current device: graph capture and replay, Triton
    launches and the codec's side stream all run on the current device (with --device cuda:1 and
    cuda:0 current, a graph would record nothing). "cuda" alone is the current one already (and
    set_device refuses a device without an index)."""
    if device.type == "cuda" and device.index is not None:
        torch.cuda.set_device(device)


class EngineCore:
    """step() = admit queued requests → schedule → run the model → the request table records the
    outputs (the family accepts them; counts, stops, errors) → the audio stage decodes → the
    request table records the audio (listeners, releases) and returns the chunks to send.

    Invariants: every added request either produces exactly one finished `AudioChunk`, after all
    of its audio, in order, or is refused once (raised by `add`, or later through
    `take_refusals` while it had no audio); an exception raised for one request ends that request
    only; a finished or aborted request holds no KV blocks; every moment the core reads or
    records is `clock()`'s (monotonic seconds by default; tests pass a fake one).
    """

    def __init__(self, config: EngineConfig, family: SpeechFamily | None = None, clock: Clock = time.monotonic) -> None:
        self.config = config
        self.clock = clock
        make_current(config.model.torch_device)
        self.family = family or load_family(config.model)
        self.device = self.family.backbone.device
        codec = self.family.codec
        streaming = config.streaming.resolve(codec.window_hints)
        # NOTE: before the KV cache is sized from the memory left: the codec's state pool (MBs a
        # stream for Qwen3-TTS's 12 Hz decoder) and its graphs are then not promised to it.
        self.audio = AudioStage.build(codec, streaming, config.capacity, config.gpu, self.device,
                                      config.scheduler.max_num_seqs, config.cache.codec_state_slots,
                                      config.cache.codec_primer_bytes)
        self.runner = build_model_runner(self.family, config, self.device, clock)
        self.kv_manager = self.runner.kv_manager
        self.step_cost = StepCostModel()
        self.scheduler = Scheduler(config.scheduler, self.kv_manager, self.step_cost, config.capacity)
        self.sample_rate = codec.sample_rate
        self.stats = EngineStats(ready=True, kv_blocks_total=self.kv_manager.num_blocks)
        self._refused: list[tuple[str, RequestRejected]] = []  # queued, then refused: not yet told
        self.limits = EngineLimits(
            context_tokens=min(self.family.max_model_len, self.kv_manager.num_blocks * config.cache.block_size),
            outputs_per_second=self.family.outputs_per_second,
        )
        self.requests = RequestTable(self.family, self.scheduler, self.audio, self.stats, self.sample_rate,
                                     self.limits.context_tokens)
        frames_per_output = codec.sample_rate / codec.samples_per_frame / self.limits.outputs_per_second
        self.admission = Admission(
            config.capacity, config.scheduler.max_num_seqs, self.step_cost, 1.0 / self.limits.outputs_per_second,
            math.ceil((streaming.first_chunk_frames + streaming.first_lookahead_frames) / frames_per_output),
            free_slots=lambda: self.audio.free_state_slots,
        )

    # ---- one step --------------------------------------------------------------------------

    def step(self) -> list[AudioChunk]:
        started = self.clock()
        self._admit_queued(started)
        self.requests.fill_starved(started, self.config.capacity.feed_slack_seconds)
        scheduled = self.scheduler.schedule(self.clock())
        # NOTE: with a codec thread (CPU), the frames of the steps before decode beside this
        # step's forward, and are collected before this step's frames reach the audio stage.
        self.audio.decode_beside(self.clock())
        result = self.runner.execute(scheduled.chunks, self.requests.streams_of(scheduled))
        beside = self._decode_audio() if self.audio.decodes_beside else None
        self.requests.record_outputs(scheduled, result, self.clock())
        ready = self._decode_audio() if beside is None else self.audio.with_first_chunks(beside, self.clock())
        chunks = self.requests.record_audio(ready, self.audio.take_failures(), self.clock())
        self.audio.launch_next(self.clock())
        self._observe(scheduled, self.clock() - started, result)
        return chunks

    # ---- requests in and out ---------------------------------------------------------------

    def add(self, message: AddRequest) -> None:
        """Starts a request, queues it (admission), or raises RequestRejected; nothing else is
        affected either way. A `continuation` (a later segment of an admitted speech) starts.
        `outputs_after`: what the rest of its speech is expected to take after it, which
        admission commits to as well (the engine sees one segment of a speech at a time).
        `follows`: the request whose audio its listener hears right before this one's (the
        previous segment); its playback, deadlines and slack count from when that audio runs
        out, and it takes over that request's `outputs_after`. `arrived`: when its speech reached
        the server (this clock's seconds); its first audio is due `max_queue_delay` after that."""
        request = self._new_request(message)
        try:
            if self.admission.offer(request, self._committed(request.arrival), request.arrival, message.continuation):
                self.requests.start(request)
        except Overloaded as exc:
            self.family.release(request.stream)
            raise RequestRejected(str(exc), "overloaded", exc.retry_after) from exc
        except RequestRejected:
            self.family.release(request.stream)
            raise

    def add_request(self, request_id: str, prompt: SpeechPrompt, params: SamplingParams, **options) -> None:
        """`add` with the message's fields as arguments (`options`: those of AddRequest)."""
        self.add(AddRequest(request_id, prompt, params, **options))

    def abort_request(self, request_id: str) -> None:
        """Ends a request now, frees its blocks, drops its pending audio; unknown ids: no-op."""
        queued = self.admission.withdraw(request_id)
        if queued is not None:
            self.requests.end_queued(queued)
        else:
            self.requests.abort(request_id)

    def extend_text(self, request_id: str, text_ids: list[int], final: bool, max_tokens: int | None = None) -> None:
        """More text of a live request (its prompt's `text_complete` False), read while it speaks;
        `final`: the last piece; `max_tokens`: the output budget of its text so far (the fillers
        it reads come on top; within the context, never below one more output). A stream that
        has read all it was given waits for this, keeping its blocks and taking no step (or
        reading fillers). Unknown or ended ids: no-op. A request that cannot take it ends with an
        error (queued: refused)."""
        request = self.requests.get(request_id)
        if request is not None:
            if request.finish_reason is None:
                self.requests.extend_text(request, text_ids, final, max_tokens)
            return
        queued = next((r for r in self.admission.queue if r.request_id == request_id), None)
        if queued is None:
            return
        try:
            self.requests.extend_text(queued, text_ids, final, max_tokens)  # type: ignore[arg-type]
        except ValueError as exc:
            self.admission.withdraw(request_id)
            self.family.release(queued.stream)  # type: ignore[attr-defined]
            self._refused.append((request_id, RequestRejected(str(exc), "invalid_prompt")))

    def set_paused(self, request_id: str, paused: bool) -> None:
        """Backpressure from the API: a paused request keeps its blocks and its place but takes
        no step until resumed (frames it made still decode in steps others need); unknown ids:
        no-op."""
        self.requests.pause(request_id, paused)

    def take_refusals(self) -> list[tuple[str, RequestRejected]]:
        """Queued requests refused since the last call (by id); they are gone from the engine."""
        refused, self._refused = self._refused, []
        return refused

    @property
    def has_work(self) -> bool:
        # NOTE: streams paced far ahead of their listeners (scheduler: `pace_slack_seconds`) are
        # no work until the first of them falls back to it: the loop rests instead of stepping.
        return bool(self.admission.queue) or self.requests.has_work_besides_steps or self.seconds_until_work() == 0

    def seconds_until_work(self) -> float:
        """With no work now: how long until a stream needs a step (every stream paced ahead of
        its listener: until the first falls to `pace_slack_seconds`), or a stream waiting for its
        text reads a filler (its listener runs low: `feed_slack_seconds`, the level at which the
        audio stage feeds every step); inf when neither will happen."""
        now = self.clock()
        return min(self.scheduler.seconds_until_step(now),
                   self.requests.seconds_until_fill(now, self.config.capacity.feed_slack_seconds))

    def refresh_room_estimate(self) -> None:
        """Publishes the room for new requests and the step costs in the stats (projections over
        every stream: a few times a second, not every step)."""
        now = self.clock()
        s = self.stats
        s.room = self.admission.room(self._committed(now), now)
        s.realtime_capacity = self.admission.realtime_capacity()
        s.predicted_step_seconds = self.step_cost.predict(len(self.scheduler.running))

    # ---- helpers ---------------------------------------------------------------------------

    def _new_request(self, message: AddRequest) -> Request:
        """The request `message` asks for, checked against the engine's limits (RequestRejected)."""
        request_id, prompt = message.request_id, message.prompt
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
            stream = self.family.new_stream(prompt, message.params)
        except ValueError as exc:  # a prompt this family cannot run: refuse it, keep the others going
            raise RequestRejected(str(exc), "invalid_prompt") from exc
        now = self.clock()
        delay = self.config.capacity.max_queue_delay
        due_from = now if message.arrived is None else min(now, message.arrived)
        listener = Listener(self.sample_rate, first_audio_due=math.inf if delay is None else due_from + delay)
        seq = Sequence(
            request_id=request_id,
            num_prompt_tokens=prompt_len,
            max_output_tokens=min(stream.max_outputs, max_len - prompt_len),
            priority=message.priority,
            prompt_block_hashes=self._prompt_block_hashes(prompt),
            listener=listener,
        )
        follows = self.requests.get(message.follows) if message.follows is not None else None
        return Request(request_id, seq, stream, arrival=now, outputs_after=max(0, message.outputs_after),
                       follows=follows)

    def _admit_queued(self, now: float) -> None:
        if not self.admission.queue:
            return
        started, late = self.admission.poll(self._committed(now), now)
        refused = [(request, RequestRejected(str(exc), "overloaded", exc.retry_after)) for request, exc in late]
        for request in started:
            try:
                self.requests.start(request)
            except RequestRejected as exc:
                refused.append((request, exc))
        for request, exc in refused:
            self.family.release(request.stream)
            self._refused.append((request.request_id, exc))

    def _committed(self, now: float) -> list[StreamOutlook]:
        """Every admitted stream still generating, as admission projects it (not the paused:
        their clients are behind, and they take no step until those catch up)."""
        return [self.admission.outlook(r, self.audio.pending_seconds(r.request_id), now)
                for r in self.requests.generating()]

    def _decode_audio(self):
        started = self.clock()
        ready = self.audio.step(started)
        self.stats.codec_seconds += self.clock() - started
        return ready

    def _prompt_block_hashes(self, prompt: SpeechPrompt) -> list[int]:
        if not self.config.cache.enable_prefix_caching:
            return []
        return hash_full_blocks(prompt.token_ids, self.config.cache.block_size, extra_key=prompt.cache_salt)

    def _observe(self, scheduled: SchedulerOutput, step_seconds: float, result: StepResult) -> None:
        """The step's cost (for the model that plans admission and prefill) and the stats."""
        if scheduled.chunks:
            rows = sum(1 for c in scheduled.chunks if c.num_new_tokens == 1)
            self.step_cost.observe(rows, scheduled.num_batched_tokens - rows, step_seconds, result.forward_seconds)
        s = self.stats
        s.steps += 1
        s.step_seconds += step_seconds
        s.forward_seconds += result.forward_seconds
        s.emit_seconds += result.emit_seconds
        s.num_running = len(self.scheduler.running)
        s.num_waiting = len(self.scheduler.waiting)
        s.num_queued = len(self.admission.queue)
        counts = self.admission.counts
        s.requests_admitted, s.requests_queued, s.requests_refused = counts.admitted, counts.queued, counts.refused
        s.realtime_capacity = self.admission.realtime_capacity()
        s.predicted_step_seconds = self.step_cost.predict(s.num_running)
        s.kv_blocks_used = self.kv_manager.num_used_blocks
        hits = self.kv_manager.prefix_cache_stats
        s.prefix_cache_hit_rate = hits.hits / hits.queries if hits.queries else 0.0
