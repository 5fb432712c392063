"""The asyncio face of the engine: submit text, iterate over audio chunks, abort on cancel."""
from __future__ import annotations

import asyncio
import logging
import multiprocessing
import signal
import threading
import time
import uuid
from queue import Queue
from typing import AsyncIterator, Callable

from engine.allocator import core_preload, preloaded
from engine.config import EngineConfig
from engine.core import EngineCore
from engine.core_loop import CORE_THREAD_NAME, core_process_main, queue_receiver, run_core_guarded
from engine.errors import EngineDeadError, RequestRejected
from engine.messages import (AbortRequest, AddRequest, CoreFailed, CoreReady, ExtendText, PauseRequest, Rejected,
                             Shutdown, StatsUpdate)
from engine.outputs import AudioChunk, EngineLimits, EngineStats
from engine.restart_policy import RestartPolicy
from model.families.base import PromptFrontend, SpeechPrompt
from model.loader import load_frontend
from model.sampling import SamplingParams

logger = logging.getLogger("chorus.engine")


class EngineClient:
    """Prepares prompts in this process and talks to the engine core (a child process, or a
    thread in `inproc` mode). Invariant: each open request has one queue that receives its chunks
    in order and ends with a finished chunk or an exception; leaving `synthesize` early aborts it.
    A core process that dies after it was ready ends every open request with EngineDeadError at
    once and is started again (`restart_policy`); when the policy gives up, `gave_up` is set.
    """

    def __init__(self, config: EngineConfig) -> None:
        self.config = config
        self.frontend: PromptFrontend = load_frontend(config.model)
        self.sample_rate = self.frontend.sample_rate
        self.stats = EngineStats()
        # The core's limits, from its ready message: known once `start` has returned.
        self.limits: EngineLimits | None = None
        self._queues: dict[str, asyncio.Queue] = {}
        self._dead: str | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready = asyncio.Event()
        self._send_lock = threading.Lock()
        self._send: Callable[[object], None] | None = None
        self._process: multiprocessing.process.BaseProcess | None = None
        self._threads: list[threading.Thread] = []
        self._closing = False
        self.restart_policy = RestartPolicy(config.max_core_restarts, config.restart_window_seconds)
        self.restarts = 0  # core processes started again after a death
        self.failure: str | None = None  # why the core last died, until it is ready again
        self.gave_up = asyncio.Event()
        self._restarting: asyncio.Task | None = None

    # ---- lifecycle -------------------------------------------------------------------------

    async def start(self) -> "EngineClient":
        self._loop = asyncio.get_running_loop()
        if self.config.mode == "inproc":
            self._start_thread()
        else:
            self._start_process()
        waiter = asyncio.ensure_future(self._ready.wait())
        done, _ = await asyncio.wait([waiter], timeout=600)
        if not done:
            raise EngineDeadError("the engine core did not become ready within 600 s")
        if self._dead:
            raise EngineDeadError(f"engine core failed to start:\n{self._dead}")
        return self

    async def close(self) -> None:
        self._closing = True
        if self._restarting is not None:
            self._restarting.cancel()
            await asyncio.gather(self._restarting, return_exceptions=True)
        if self._send is not None and not self._dead:
            self._post(Shutdown())
        for thread in self._threads:
            await asyncio.to_thread(thread.join, 10)
        if self._process is not None:
            await asyncio.to_thread(self._process.join, 10)
            if self._process.is_alive():
                self._process.kill()

    async def __aenter__(self) -> "EngineClient":
        return await self.start()

    async def __aexit__(self, *exc) -> None:
        await self.close()

    @property
    def is_ready(self) -> bool:
        return self._ready.is_set() and not self._dead

    @property
    def status(self) -> str:
        """"ready", "starting" (the first start), "restarting" (after a death), or "failed"
        (the restart policy gave up)."""
        if self.gave_up.is_set():
            return "failed"
        if self.failure is not None:
            return "restarting"
        return "ready" if self.is_ready else "starting"

    @property
    def core_pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    # ---- requests --------------------------------------------------------------------------

    async def synthesize(
        self,
        text: str,
        voice: str,
        params: SamplingParams | None = None,
        request_id: str | None = None,
        priority: int = 0,
        speed: float = 1.0,
        prompt: SpeechPrompt | None = None,
        continuation: bool = False,
        outputs_after: int = 0,
        follows: str | None = None,
        arrived: float | None = None,
    ) -> AsyncIterator[AudioChunk]:
        """Yields the request's audio as it is produced. Raises RequestRejected (bad input,
        full queue, overload: see its `retry_after`), VoiceNotFoundError, or EngineDeadError.
        `speed` reaches models that control their own rate, within `frontend.speed_range`; the
        caller time-stretches the rest. `prompt`, when given, is `frontend.prepare(text, voice,
        speed)` already done (the API prepares every prompt in its own pool) and is used as is;
        without it, this library path prepares on the default executor. `continuation`: a later
        segment of a speech already admitted; admission never refuses or delays it.
        `outputs_after`: what the speech's later segments are expected to take (admission
        plans for the whole speech, not only this request). `follows`: the request whose audio
        is heard right before this one's (the previous segment): the engine then knows this
        request's listener is not waiting for it until that audio has played. `arrived`: when
        the speech reached the caller (time.monotonic()); its first-audio deadline counts from
        then, so a prompt's preparation spends the same budget as waiting for room."""
        if prompt is None:
            # NOTE: on a worker thread: a phonemizer + text encoder (the joe voice) takes
            # milliseconds that would otherwise stall every other stream's chunks on this loop.
            prompt = await asyncio.to_thread(self.frontend.prepare, text, voice, speed)
        request_id = request_id or uuid.uuid4().hex
        params = params or self.frontend.default_sampling()
        if self._dead or not self._ready.is_set():
            raise EngineDeadError(self._dead or "the engine core is starting again")
        if request_id in self._queues:
            raise RequestRejected(f"request id {request_id!r} is in use", "duplicate_request_id")
        queue: asyncio.Queue = asyncio.Queue()
        self._queues[request_id] = queue
        self._post(AddRequest(request_id, prompt, params, priority, continuation, outputs_after, follows, arrived))
        finished = False
        try:
            while True:
                item = await queue.get()
                if isinstance(item, Exception):
                    finished = True
                    raise item
                yield item
                if item.finished:
                    finished = True
                    return
        finally:
            self._queues.pop(request_id, None)
            if not finished and not self._dead:
                self._post_if_alive(AbortRequest(request_id))

    def extend_text(self, request_id: str, text_ids: list[int], final: bool = False,
                    max_tokens: int | None = None) -> None:
        """More of a live request's text (its front end's `live_text_ids`); `final`: the last
        piece; `max_tokens`: the output budget of its text so far (the engine adds its fillers)."""
        if not self._dead and request_id in self._queues:
            self._post_if_alive(ExtendText(request_id, list(text_ids), final, max_tokens))

    def pause(self, request_id: str, paused: bool) -> None:
        """Backpressure: stops (or resumes) generating for a request whose client is behind."""
        if not self._dead and request_id in self._queues:
            self._post_if_alive(PauseRequest(request_id, paused))

    # ---- transport -------------------------------------------------------------------------

    def _post(self, message: object) -> None:
        """Sends to the core; a pipe already broken (the core died, its CoreFailed not yet
        delivered) raises EngineDeadError, as the request would have failed anyway."""
        try:
            with self._send_lock:
                self._send(message)
        except (OSError, ValueError) as exc:
            raise EngineDeadError("the engine core is gone") from exc

    def _post_if_alive(self, message: object) -> None:
        """For messages about requests the core may already have lost with its life."""
        try:
            self._post(message)
        except EngineDeadError:
            pass

    def _deliver(self, messages: list) -> None:
        """Runs on the event loop: routes core messages to their request queues."""
        for message in messages:
            if isinstance(message, AudioChunk):
                queue = self._queues.get(message.request_id)
                if queue is not None:
                    queue.put_nowait(message)
            elif isinstance(message, StatsUpdate):
                self.stats = message.stats
            elif isinstance(message, Rejected):
                queue = self._queues.get(message.request_id)
                if queue is not None:
                    queue.put_nowait(RequestRejected(message.message, message.code, message.retry_after))
            elif isinstance(message, CoreReady):
                self.limits = message.limits
                self.stats = message.stats
                self._ready.set()
            elif isinstance(message, CoreFailed):
                self._on_core_failed(message.message)

    def _on_core_failed(self, reason: str) -> None:
        """Ends every open request with EngineDeadError; a core process that had been ready is
        started again by the restart policy (a first start that fails is `start`'s to report)."""
        was_ready = self._ready.is_set() and not self._dead
        self._dead = reason
        for queue in self._queues.values():
            queue.put_nowait(EngineDeadError("the engine core stopped; see the server log"))
        self._ready.set()
        if self._closing or (not was_ready and self._restarting is None):
            return
        logger.error("engine core died: %s", reason)
        self.failure = reason
        if self._process is None:  # an in-process core (tests, debugging): nothing to restart
            self.gave_up.set()
            return
        if self._restarting is None:
            self._restarting = asyncio.ensure_future(self._restart())

    async def _restart(self) -> None:
        """Starts the core again after the policy's delay, until one is ready or it gives up."""
        try:
            while not self._closing:
                delay = self.restart_policy.next_delay(time.monotonic())
                if delay is None:
                    logger.critical("engine core died %d times within %.0f s; giving up",
                                    self.restart_policy.max_restarts + 1, self.restart_policy.window_seconds)
                    self.gave_up.set()
                    return
                logger.warning("restarting the engine core in %.1f s", delay)
                await asyncio.sleep(delay)
                await asyncio.to_thread(self._reap, self._process)
                self._ready.clear()
                self._dead = None
                self.restarts += 1
                try:
                    self._start_process()
                except Exception as exc:  # noqa: BLE001 - a failed spawn is a failed restart
                    self._dead = f"the engine core could not be started: {exc!r}"
                    self._ready.set()
                await self._ready.wait()
                if not self._dead:
                    logger.info("engine core ready again (restart %d)", self.restarts)
                    self.failure = None
                    return
                logger.error("engine core restart failed: %s", self._dead)
        finally:
            self._restarting = None

    @staticmethod
    def _reap(process: multiprocessing.process.BaseProcess | None) -> None:
        """Makes sure a dead core's process is gone before another starts (one that closed its
        pipe but lives on would hold the device)."""
        if process is not None and process.is_alive():
            process.kill()
        if process is not None:
            process.join(10)

    def _deliver_threadsafe(self, messages: list) -> None:
        assert self._loop is not None
        if not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._deliver, messages)

    def _start_thread(self) -> None:
        inbox: Queue = Queue()
        self._send = inbox.put
        thread = threading.Thread(
            target=run_core_guarded,
            args=(lambda: EngineCore(self.config), queue_receiver(inbox), self._deliver_threadsafe),
            name=CORE_THREAD_NAME,
            daemon=True,
        )
        thread.start()
        self._threads.append(thread)

    def _start_process(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        parent, child = ctx.Pipe(duplex=True)
        self._process = ctx.Process(
            target=core_process_main, args=(self.config, child), name="chorus-engine-core", daemon=True
        )
        with preloaded(core_preload(self.config.allocator, self.config.model.torch_device.type)):
            self._process.start()
        # Logged so `py-spy dump --pid` / `py-spy record --pid` can find the core directly.
        logger.info("engine core process started: pid %d", self._process.pid)
        child.close()
        self._send = parent.send
        reader = threading.Thread(
            target=self._read_pipe, args=(parent, self._process), name="chorus-engine-reader", daemon=True
        )
        reader.start()
        self._threads.append(reader)

    def _read_pipe(self, conn, process: multiprocessing.process.BaseProcess) -> None:
        while True:
            try:
                messages = conn.recv()
            except (EOFError, OSError):
                if not self._closing:
                    process.join(5)  # reaped, and its exit code known
                    self._deliver_threadsafe([CoreFailed(f"the engine core process (pid {process.pid}) "
                                                         f"{_exit_description(process.exitcode)}")])
                return
            self._deliver_threadsafe(messages)
            if any(isinstance(m, CoreFailed) for m in messages):
                return


def _exit_description(code: int | None) -> str:
    if code is None:
        return "closed its pipe and is still running"
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"
