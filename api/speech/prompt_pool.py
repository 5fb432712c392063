"""The prompt-preparation pool: text → SpeechPrompt on worker threads of its own, in order of need,
so that neither the event loop nor the engine core's step ever runs a front end."""
from __future__ import annotations

import asyncio
import functools
import heapq
import itertools
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable

from api.http.heap import give_back_memory
from api.speech.prompt_cache import MAX_CACHED_CHARS, PromptCache, PromptKey
from api.http.metrics import PROMPT_KINDS, PromptPoolMetrics
from api.speech.voice_choice import VoiceChoice
from model.families.base import SpeechPrompt
from model.text import normalize as normalize_text

# prepare(text, voice, speed, max_tokens=..., language=..., instructions=...): a front end's
# `prepare` (model/families/base.py).
Prepare = Callable[..., SpeechPrompt]
FIRST, LATER = PROMPT_KINDS


def _prepare_read(prepare: Prepare, text: str, normalize: bool, *args: Any, **kwargs: Any) -> SpeechPrompt:
    """`prepare` of `text`, read through the English normalizer first when asked (on the worker)."""
    return prepare(normalize_text(text, "english").text if normalize else text, *args, **kwargs)


@dataclass(slots=True, order=True)
class _Job:
    # (0 for a first segment else 1, the speech's arrival, segment index, submission order):
    # the heap's order is the order of need.
    need: tuple[int, int, int, int]
    kind: str = field(compare=False)
    call: Callable[[], Any] = field(compare=False)
    future: asyncio.Future = field(compare=False)
    queued_at: float = field(compare=False)


class PromptPool:
    """Runs `prepare` on `workers` threads, one job per thread at a time. Invariants: a job runs
    at most once; a worker always takes the most needed queued job, so no later segment starts
    while a first segment is queued (first segments go in speech arrival order, later ones by
    their speech's arrival, then segment index); a job whose future is cancelled leaves the queue
    at once, and if it is running, its result is dropped; a failure reaches the job's awaiter.

    With two workers or more, later segments run on at most `workers - 1` of them at once, so a
    first segment that arrives finds a worker free or about to be (a later segment takes tens of
    milliseconds and its audio is not needed for seconds).

    Its thread budget is `workers` threads: `prepare` itself stays single-threaded (the joe front
    end's onnxruntime sessions run one intra-op thread without spinning, model/families/joe/
    teacher.py; espeak is serialized by its own lock), apart from the engine core's torch threads.
    All queue state lives on the event loop; the threads only run `prepare`. Each time the pool
    goes idle (no job queued or running) it gives the heap's free memory back to the system
    (api/http/heap.py): what a long prompt took does not stay resident.
    """

    def __init__(self, prepare: Prepare, workers: int = 1, metrics: PromptPoolMetrics | None = None,
                 cache: PromptCache | None = None) -> None:
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self._prepare = prepare
        self.cache = cache
        self._workers = workers
        self.metrics = metrics or PromptPoolMetrics()
        self._queue: list[_Job] = []
        self._queued = Counter({kind: 0 for kind in PROMPT_KINDS})
        self._has_jobs = asyncio.Event()
        self._arrivals = itertools.count()
        self._submissions = itertools.count()
        self._executor: ThreadPoolExecutor | None = None
        self._tasks: list[asyncio.Task] = []
        self._later_running = 0
        self._running = 0

    async def start(self) -> PromptPool:
        self._executor = ThreadPoolExecutor(self._workers, thread_name_prefix="chorus-prompt")
        self._tasks = [asyncio.create_task(self._work(), name=f"chorus-prompt-{i}") for i in range(self._workers)]
        return self

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for job in list(self._queue):
            job.future.cancel()
        if self._executor is not None:
            # NOTE: a prepare already running finishes on its thread; nothing waits for it.
            self._executor.shutdown(wait=False, cancel_futures=True)

    async def __aenter__(self) -> PromptPool:
        return await self.start()

    async def __aexit__(self, *exc) -> None:
        await self.close()

    def next_arrival(self) -> int:
        """A new speech's place in arrival order, for its jobs' `arrival`."""
        return next(self._arrivals)

    def submit(self, text: str, voice: VoiceChoice, speed: float, *, arrival: int, index: int, first: bool,
               max_tokens: int | None = None, live: bool = False) -> asyncio.Future:
        """Queues the prompt of `text` in `voice` (its name, language, instructions, clone) at `speed`,
        of at most `max_tokens`, for segment `index` of the speech that arrived `arrival`-th;
        `first`: its first audio waits on this one. Cancelling the returned future drops the job.
        A prompt the pool's cache holds (the same text, voice and options prepared before) comes
        back at once, as a future already done, and one prepared now is kept there. `live`: the
        prompt of a live text's first words (`prepare(live=True)`), never cached."""
        extra = {} if voice.clone is None else {"clone": voice.clone}
        if live:
            extra["live"] = True
        key = None
        if self.cache is not None and voice.clone is None and not live and len(text) <= MAX_CACHED_CHARS:
            key = PromptKey(text, voice.normalize, voice.name, speed, voice.language, voice.instructions)
            cached = self.cache.get(key)
            # A prompt over this job's token limit goes to the front end, whose count decides.
            if cached is not None and (max_tokens is None or len(cached.token_ids) <= max_tokens):
                self.metrics.cache_hits.inc()
                done = asyncio.get_running_loop().create_future()
                done.set_result(cached)
                return done
        call = functools.partial(_prepare_read, self._prepare, text, voice.normalize, voice.name, speed,
                                 max_tokens=max_tokens, language=voice.language, instructions=voice.instructions,
                                 **extra)
        future = self._enqueue(call, FIRST if first else LATER, (0 if first else 1, arrival, index))
        if key is not None:
            future.add_done_callback(functools.partial(self._keep, key))
        return future

    def _keep(self, key: PromptKey, done: asyncio.Future) -> None:
        if not done.cancelled() and done.exception() is None:
            self.cache.put(key, done.result())
            self.metrics.cache_bytes.set(self.cache.bytes)

    def run(self, function: Callable[..., Any], *args: Any) -> asyncio.Future:
        """Runs `function(*args)` on a worker thread, after every first segment queued and
        counted as a later one (e.g. the voice library's encoders: nobody's first audio waits on
        them). Cancelling the returned future drops it if it has not started."""
        return self._enqueue(functools.partial(function, *args), LATER, (1, next(self._arrivals), 0))

    def _enqueue(self, call: Callable[[], Any], kind: str, need: tuple[int, int, int]) -> asyncio.Future:
        future = asyncio.get_running_loop().create_future()
        job = _Job((*need, next(self._submissions)), kind, call, future, time.monotonic())
        heapq.heappush(self._queue, job)
        self._count(kind, +1)
        self._has_jobs.set()
        future.add_done_callback(lambda done: self._drop(job) if done.cancelled() else None)
        return future

    def _drop(self, job: _Job) -> None:
        if job in self._queue:
            self._queue.remove(job)
            heapq.heapify(self._queue)
            self._count(job.kind, -1)

    def _count(self, kind: str, change: int) -> None:
        self._queued[kind] += change
        self.metrics.queue_depth.labels(kind).set(self._queued[kind])

    def _may_take(self) -> bool:
        """Whether a free worker may take the queue's most needed job now."""
        return bool(self._queue) and (
            self._queue[0].kind == FIRST or self._workers == 1 or self._later_running < self._workers - 1)

    async def _take(self) -> _Job:
        while True:
            while not self._may_take():
                self._has_jobs.clear()
                await self._has_jobs.wait()
            job = heapq.heappop(self._queue)
            self._count(job.kind, -1)
            # NOTE: a future's done callbacks run a loop turn after `cancel`: a job cancelled
            # since can still be here.
            if not job.future.done():
                return job

    async def _work(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            job = await self._take()
            started = time.monotonic()
            self.metrics.wait_seconds.labels(job.kind).observe(started - job.queued_at)
            later = job.kind == LATER
            self._later_running += later
            self._running += 1
            try:
                result = await loop.run_in_executor(self._executor, job.call)
            except Exception as exc:  # the front end's refusal belongs to whoever asked
                if not job.future.done():
                    job.future.set_exception(exc)
            else:
                if not job.future.done():
                    job.future.set_result(result)
            finally:
                self.metrics.prepare_seconds.labels(job.kind).observe(time.monotonic() - started)
                self._running -= 1
                if later:
                    self._later_running -= 1
                    self._has_jobs.set()  # a worker held back from later segments may take one
                if not self._running and not self._queue:
                    loop.run_in_executor(self._executor, give_back_memory)
