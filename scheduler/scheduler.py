"""Iteration-level scheduling: which sequences run this step, and how many tokens each gets."""
from __future__ import annotations

import bisect
import math
from typing import Collection, Protocol, Sequence as Seq

from capacity.config import CapacityConfig
from capacity.step_cost import StepCostModel
from scheduler.config import SchedulerConfig
from scheduler.output import ScheduledChunk, SchedulerOutput
from scheduler.sequence import Sequence, SequenceStatus


class BlockAccounting(Protocol):
    """The part of memory/'s KV cache manager that scheduling needs."""

    block_size: int

    def find_cached_prefix(self, block_hashes: Seq[int], max_blocks: int) -> list: ...
    def allocate_slots(self, request_id: str, num_tokens: int, cached_prefix: Seq = ()) -> bool: ...
    def cache_full_blocks(self, request_id: str, block_hashes: Seq[int], num_computed_tokens: int) -> None: ...
    def free(self, request_id: str) -> None: ...


class QueueFullError(RuntimeError):
    """The waiting queue is at `max_waiting`; the caller should retry later."""


class Scheduler:
    """Gives each step's token budget to running sequences first, earliest deadline first, then to
    waiting prompts.

    Invariants:
    - A step never exceeds `max_num_batched_tokens`, and at most `max_num_seqs` sequences run.
    - Running sequences that are decoding get their token before any prefill chunk is scheduled,
      in order of their deadline (the stream closest to running dry first; ties by admission),
      so a long prompt delays a running stream by at most one chunk.
    - With a clock (`schedule(now)`): a decoding stream sits out a step only when its listener
      holds more than `skip_slack_seconds` of audio, a prompt is waiting or prefilling, and the
      step has other work; and the step's prefill tokens are limited so that `step_cost`
      predicts it to end before the smallest positive slack among the streams it decodes.
    - With a clock and `pace_slack_seconds`: while two or more decoding streams play, a step is
      scheduled only when a prompt waits or prefills or a decoding stream's listener holds at
      most `pace_slack_seconds` (or has no listener); every decoding stream joins it (but those
      the rule above sits out). A lone playing stream steps as fast as it can.
    - When blocks run out, the lowest-priority, newest unscheduled running sequence is preempted:
      its blocks are freed, its computed count reset, and it waits at the front (by arrival).
    - Every sequence ends exactly once, through `finish` (or `abort`), which frees its blocks.
    - Outputs are counted here only (`update_from_output`), one per chunk that produces one, and
      that count alone decides when a sequence reaches its output limit.
    """

    def __init__(self, config: SchedulerConfig, kv: BlockAccounting, step_cost: StepCostModel | None = None,
                 capacity: CapacityConfig | None = None) -> None:
        self.config = config
        self.capacity = capacity or CapacityConfig()
        self.kv = kv
        self.step_cost = step_cost or StepCostModel()
        self.waiting: list[Sequence] = []  # kept sorted by _order_key
        self.running: list[Sequence] = []  # admission order
        self._by_id: dict[str, Sequence] = {}

    # ---- admission and removal -------------------------------------------------------------

    def add(self, seq: Sequence) -> None:
        if seq.request_id in self._by_id:
            raise ValueError(f"request id {seq.request_id!r} is already scheduled")
        if len(self.waiting) >= self.config.max_waiting:
            raise QueueFullError(f"waiting queue is full ({self.config.max_waiting} requests)")
        seq.status = SequenceStatus.WAITING
        self._by_id[seq.request_id] = seq
        self._enqueue(seq)

    def finish(self, request_id: str) -> Sequence | None:
        """Ends a sequence (done, aborted or failed) and frees its blocks; unknown ids are a no-op."""
        seq = self._by_id.pop(request_id, None)
        if seq is None:
            return None
        if seq in self.running:
            self.running.remove(seq)
        elif seq in self.waiting:
            self.waiting.remove(seq)
        self.kv.free(request_id)
        seq.status = SequenceStatus.FINISHED
        return seq

    abort = finish

    @property
    def num_unfinished(self) -> int:
        return len(self._by_id)

    # ---- one step --------------------------------------------------------------------------

    def schedule(self, now: float | None = None) -> SchedulerOutput:
        """This step's work. `now` (monotonic seconds, the clock of the sequences' deadlines)
        turns on the rules that need one: skipping streams far ahead of their listener, and
        prefill sized by slack; without it every running stream steps and prefill takes what is
        left of the budget."""
        out = SchedulerOutput()
        scheduled: set[int] = set()
        # NOTE: decoding streams first, then prompts already admitted and still prefilling, so a
        # prefill chunk can never take the token a running stream needs to stay real-time.
        # stable: ties by admission; a paused stream (its client behind) or one awaiting its text
        # takes no step at all
        by_deadline = sorted((s for s in self.running if s.takes_steps), key=lambda s: s.deadline)
        decoding = [s for s in by_deadline if not s.is_prefilling]
        prefilling = [s for s in by_deadline if s.is_prefilling]
        if not prefilling and not self._waiting_to_step() and self._all_paced(decoding, now):
            return out  # every stream is far enough ahead: none needs a step yet
        skipping = self._far_ahead(decoding, now) if prefilling or self.waiting else []
        stepping = [s for s in decoding if s not in skipping]
        budget = self._schedule_running(stepping, self.config.max_num_batched_tokens, scheduled, out)
        prefill_budget = min(budget, self._prefill_cap(out, now))
        prefill_budget = self._schedule_running(prefilling, prefill_budget, scheduled, out)
        # NOTE: after a preemption the pool is tight; admitting new prompts now would only cause
        # the next preemption, so new work waits for a step that needed none.
        if not out.preempted_ids:
            self._admit_waiting(prefill_budget, out)
        if not out.chunks and skipping:
            # Nobody else needed the step: the streams ahead of their listener may as well use it.
            self._schedule_running(skipping, self.config.max_num_batched_tokens, scheduled, out)
        return out

    def seconds_until_step(self, now: float) -> float:
        """How long until `schedule(now)` would schedule anything: 0 when a prompt waits or
        prefills or a decoding stream needs a step; with every stream paced, until the first of
        their listeners falls to `pace_slack_seconds`; inf when no sequence takes steps."""
        stepping = [s for s in self.running if s.takes_steps]
        if self._waiting_to_step() or any(s.is_prefilling for s in stepping):
            return 0.0
        if not stepping:
            return math.inf
        if not self._all_paced(stepping, now):
            return 0.0
        return max(0.0, min(s.deadline - now for s in stepping) - self.capacity.pace_slack_seconds)

    def update_from_output(self, output: SchedulerOutput, stopped: Collection[str] = ()) -> dict[str, str]:
        """After the step that ran `output`: marks its tokens computed, publishes newly full prompt
        blocks to the prefix cache and counts one output for each chunk that produced one. Then
        ends the sequences whose output stopped them (request ids in `stopped`: "stop") and those
        that reached `max_output_tokens` ("length"). Sequences already ended during the step (a
        failure) are left alone. Returns the reason of each sequence ended here, in chunk order."""
        finished: dict[str, str] = {}
        for chunk in output.chunks:
            seq = chunk.seq
            if seq.is_finished:
                continue
            seq.num_computed_tokens = chunk.end
            if seq.prompt_block_hashes:
                self.kv.cache_full_blocks(
                    seq.request_id, seq.prompt_block_hashes, seq.num_computed_tokens
                )
            if not chunk.produces_output:
                continue
            seq.num_output_tokens += 1
            if seq.request_id in stopped:
                reason = "stop"
            elif seq.num_output_tokens >= seq.max_output_tokens:
                reason = "length"
            else:
                continue
            self.finish(seq.request_id)
            finished[seq.request_id] = reason
        return finished

    # ---- helpers ---------------------------------------------------------------------------

    def _schedule_running(self, seqs: list[Sequence], budget: int, scheduled: set[int], out: SchedulerOutput) -> int:
        """Chunks for running `seqs` in order, within `budget`; returns what is left of it."""
        for seq in seqs:
            if budget == 0:
                break
            if seq.status is not SequenceStatus.RUNNING:
                continue  # preempted earlier in this step to make room for an older stream
            num_new = self._chunk_size(seq, budget)
            if not self._allocate_or_preempt(seq, num_new, scheduled, out):
                continue
            out.chunks.append(ScheduledChunk(seq, seq.num_computed_tokens, num_new))
            scheduled.add(id(seq))
            budget -= num_new
        return budget

    def _far_ahead(self, decoding: list[Sequence], now: float | None) -> list[Sequence]:
        """The decoding streams whose listener holds more than `skip_slack_seconds` of audio.
        They sit out only steps that carry a prompt (a new stream's first audio waits on it):
        other steps are no faster for anyone without them, and audio made early is slack banked
        against later load (a closed-loop benchmark at 4 streams lost a fifth of its audio per
        second when later segments, far ahead, sat out every step)."""
        limit = self.capacity.skip_slack_seconds
        if now is None or limit is None:
            return []
        # NOTE: a stream without a deadline (inf) has no listener to measure against: it steps.
        return [s for s in decoding if limit < s.deadline - now < math.inf]

    def _all_paced(self, decoding: list[Sequence], now: float | None) -> bool:
        """Whether at least two decoding streams play (their listeners have had audio) and every
        decoding stream's listener holds more than `pace_slack_seconds` (batch-aware pacing):
        then none needs a step yet. A stream without a listener (inf) always does; so does a
        lone playing stream, which has nobody to share a step with (the next segment of its own
        speech, waiting to play after it, is no one), and whose client may be saving its audio
        rather than playing it (Open WebUI fetches each sentence whole before it plays it)."""
        limit = self.capacity.pace_slack_seconds
        if now is None or limit is None or sum(s.listener.runs_dry_at is not None for s in decoding) < 2:
            return False
        return all(limit < s.deadline - now < math.inf for s in decoding)

    def _waiting_to_step(self) -> bool:
        return any(s.takes_steps for s in self.waiting)

    def _prefill_cap(self, out: SchedulerOutput, now: float | None) -> int:
        """Prefill tokens the step can take and still end, as `step_cost` predicts, before the
        smallest slack among the streams it decodes (`out` holds their chunks so far)."""
        # NOTE: a stream already past its deadline is stalled whatever this step does; counting
        # it would hold every prompt back until it recovers, and the newcomers' deadlines with it.
        # One without a deadline (inf) has no listener to protect.
        slacks = [c.seq.deadline - now for c in out.chunks] if now is not None else []
        live = [slack for slack in slacks if 0 < slack < math.inf]
        if not live:
            return self.config.max_num_batched_tokens
        return self.step_cost.prefill_tokens_within(min(live), len(out.chunks))

    def _chunk_size(self, seq: Sequence, budget: int) -> int:
        num_new = min(seq.num_uncomputed_tokens, budget)
        if self.config.max_prefill_chunk is not None:
            num_new = min(num_new, self.config.max_prefill_chunk)
        return num_new

    def _allocate_or_preempt(
        self, seq: Sequence, num_new: int, scheduled: set[int], out: SchedulerOutput
    ) -> bool:
        while not self.kv.allocate_slots(seq.request_id, seq.num_computed_tokens + num_new):
            victim = self._pick_victim(scheduled)
            self._preempt(victim, out)
            if victim is seq:
                return False
        return True

    def _pick_victim(self, scheduled: set[int]) -> Sequence:
        candidates = [s for s in self.running if id(s) not in scheduled]
        # A stream that takes no step first (paused: its client is far behind, it has audio to
        # spare; or awaiting its text), then the lowest priority (largest value), then the newest.
        return max(candidates, key=lambda s: (not s.takes_steps, s.priority if self._uses_priority else 0,
                                              s.arrival_index))

    def _preempt(self, seq: Sequence, out: SchedulerOutput) -> None:
        self.running.remove(seq)
        self.kv.free(seq.request_id)
        seq.num_computed_tokens = 0
        seq.num_preemptions += 1
        seq.status = SequenceStatus.PREEMPTED
        self._enqueue(seq)
        out.preempted_ids.append(seq.request_id)

    def _admit_waiting(self, budget: int, out: SchedulerOutput) -> int:
        # NOTE: a paused sequence (preempted while its client was behind) stays waiting, without
        # holding back those after it: resuming it now would recompute it only to pause it again.
        # One awaiting its text likewise: its recomputed last position would need that text.
        waiting = [s for s in self.waiting if s.takes_steps]
        while waiting and budget > 0 and len(self.running) < self.config.max_num_seqs:
            seq = waiting[0]
            cached = []
            if seq.prompt_block_hashes:
                # Leave at least one token to compute: its output is what the step is for.
                max_blocks = (seq.num_tokens - 1) // self.kv.block_size
                cached = self.kv.find_cached_prefix(seq.prompt_block_hashes, max_blocks)
            seq.num_computed_tokens = len(cached) * self.kv.block_size
            num_new = self._chunk_size(seq, budget)
            if not self.kv.allocate_slots(seq.request_id, seq.num_computed_tokens + num_new, cached):
                seq.num_computed_tokens = 0
                break
            waiting.pop(0)
            self.waiting.remove(seq)
            seq.status = SequenceStatus.RUNNING
            self.running.append(seq)
            out.chunks.append(ScheduledChunk(seq, seq.num_computed_tokens, num_new))
            budget -= num_new
        return budget

    @property
    def _uses_priority(self) -> bool:
        return self.config.policy == "priority"

    def _order_key(self, seq: Sequence) -> tuple[int, int]:
        return (seq.priority if self._uses_priority else 0, seq.arrival_index)

    def _enqueue(self, seq: Sequence) -> None:
        # NOTE: ordering by arrival puts a preempted sequence back ahead of everything that came
        # after it, which is where the preemption policy wants it.
        keys = [self._order_key(s) for s in self.waiting]
        self.waiting.insert(bisect.bisect_right(keys, self._order_key(seq)), seq)
