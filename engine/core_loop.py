"""Runs an EngineCore: drains commands, steps while there is work, sends outputs back.

The same loop runs in a thread (in-process mode) or as the main loop of the core process; only
the `receive` and `send` callables differ.
"""
from __future__ import annotations

import logging
import os
import threading
import math
import traceback
from multiprocessing.connection import Connection
from queue import Empty, Queue
from typing import Callable

import torch

from engine.allocator import log_allocator
from engine.config import EngineConfig
from engine.core import EngineCore
from engine.errors import RequestRejected
from engine.messages import (AbortRequest, AddRequest, CoreFailed, CoreReady, ExtendText, PauseRequest, Rejected,
                             Shutdown, StatsUpdate)
from engine.process_title import set_process_title

logger = logging.getLogger("chorus.engine")

STATS_INTERVAL_S = 0.25
# Reports sent because requests arrived (see CoreLoop.run) take at most this share of the core's
# time: each projects every stream (about 1 ms at 64 CPU streams), more with hundreds on a GPU.
ARRIVAL_REPORT_SHARE = 0.05
CORE_THREAD_NAME = "chorus-engine-core"

Receive = Callable[[float | None], list]
Send = Callable[[list], None]


class CoreLoop:
    """Blocks only when the core has no work; otherwise steps back to back. Invariant: every
    command is handled before the next step, so an abort takes effect within one step."""

    def __init__(self, core: EngineCore, receive: Receive, send: Send) -> None:
        self.core = core
        self.receive = receive
        self.send = send
        self._last_stats = -math.inf
        self._report_seconds = 0.0  # what the last room refresh took, on the core's clock

    def run(self) -> None:
        # NOTE: the first stats carry a room estimate already: the API's early refusal acts on
        # it from the first request on (the stats' default, no room, refused a second speech
        # that came before the first report).
        self.core.refresh_room_estimate()
        self.send([CoreReady(self.core.sample_rate, self.core.limits, self.core.stats)])
        while True:
            # NOTE: idle, it wakes for a command, the next stats, or a stream waiting for text
            # whose listener is about to run dry (it then reads a filler).
            commands = self.receive(0.0 if self.core.has_work else min(STATS_INTERVAL_S, self.core.seconds_until_work()))
            replies: list = []
            for command in commands:
                if isinstance(command, Shutdown):
                    return
                replies.extend(self._handle(command))
            if self.core.has_work:
                replies.extend(self.core.step())
                replies.extend(Rejected.of(rid, exc) for rid, exc in self.core.take_refusals())
            now = self.core.clock()
            # NOTE: also right after requests arrive: the API's early refusal spends the last
            # report's room one request at a time, and a burst of arrivals used it up on a report
            # that predated them all (every 429 at 48 paced listeners came from one such burst).
            arrived = any(isinstance(command, AddRequest) for command in commands)
            since = now - self._last_stats
            if since >= STATS_INTERVAL_S or (arrived and since * ARRIVAL_REPORT_SHARE >= self._report_seconds):
                self._last_stats = now
                self.core.refresh_room_estimate()
                self._report_seconds = self.core.clock() - now
                replies.append(StatsUpdate(self.core.stats))
            if replies:
                self.send(replies)

    def _handle(self, command) -> list:
        if isinstance(command, AbortRequest):
            self.core.abort_request(command.request_id)
            return []
        if isinstance(command, PauseRequest):
            self.core.set_paused(command.request_id, command.paused)
            return []
        if isinstance(command, ExtendText):
            self.core.extend_text(command.request_id, command.text_ids, command.final, command.max_tokens)
            return []
        if isinstance(command, AddRequest):
            try:
                self.core.add(command)
            except RequestRejected as exc:
                return [Rejected.of(command.request_id, exc)]
            return []
        raise TypeError(f"unknown engine command {command!r}")


def run_core_guarded(build_core: Callable[[], EngineCore], receive: Receive, send: Send) -> None:
    """Runs the loop; a crash is reported to the client instead of dying silently."""
    try:
        CoreLoop(build_core(), receive, send).run()
    except Exception:  # noqa: BLE001 - the client must learn the core is gone, and why
        logger.exception("engine core failed")
        send([CoreFailed(traceback.format_exc())])


def queue_receiver(inbox: Queue) -> Receive:
    def receive(timeout: float | None) -> list:
        try:
            first = inbox.get(timeout=timeout) if timeout else inbox.get_nowait()
        except Empty:
            return []
        items = [first]
        while True:
            try:
                items.append(inbox.get_nowait())
            except Empty:
                return items

    return receive


def pipe_receiver(conn: Connection, parent_pid: int | None = None) -> Receive:
    """Commands from the API process's end of the pipe. With `parent_pid`, a core whose parent
    has gone (re-parented: getppid changed) is told to shut down, even if some other process
    still holds the pipe's far end open so that no end-of-file ever comes: a core never
    outlives the process it serves."""
    def receive(timeout: float | None) -> list:
        items = []
        while conn.poll(timeout if not items else 0):
            items.append(conn.recv())
        if parent_pid is not None and os.getppid() != parent_pid:
            items.append(Shutdown())
        return items

    return receive


def core_process_main(config: EngineConfig, conn: Connection) -> None:
    """Entry point of the engine core process."""
    # Named so `ps`, `top` and py-spy show the core as itself, not as a multiprocessing stub.
    set_process_title(CORE_THREAD_NAME)
    threading.current_thread().name = CORE_THREAD_NAME
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    threads = config.core_threads()
    if threads:
        torch.set_num_threads(threads)
    log_allocator(config.model.torch_device.type)
    run_core_guarded(lambda: EngineCore(config), pipe_receiver(conn, os.getppid()), conn.send)
