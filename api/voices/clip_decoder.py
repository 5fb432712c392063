"""The clip decoders: every upload a voice is made from is decoded in a process of its own
(api/voices/clip_worker.py), never in the API's, so that a file which crashes FFmpeg or PyAV, or
runs away with their memory or CPU, costs that upload and nothing else.

Vocabulary: a *decoder* is one such process; it takes one job (an upload) and exits; a *spare*
is a decoder started ahead of its job, so that an upload does not wait for Python and PyAV to
import (only one that comes while all the others are being decoded may). A decoder *fails* a
job when it dies without an answer (a signal, a non-zero exit: cause `crashed`, or `memory` /
`cpu` when its limits ended it), takes longer than the timeout (`timeout`), or answers
something that is not an answer (`protocol`); the job is then refused as a
ClipRejected("decoder_failed").
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import os
import signal
import sys
from dataclasses import dataclass

import numpy as np
from prometheus_client import Counter

from api.voices.clip import REFUSALS, Clip, ClipRejected
from api.voices.clip_worker import EXIT_OUT_OF_MEMORY, LENGTH, message_head

logger = logging.getLogger("chorus.api.voices")
# An answer's header is a few dozen bytes; a refusal's message, a sentence.
MAX_HEADER_BYTES = 64 * 1024
# What of a failed decoder's stderr the log keeps (a traceback's end, FFmpeg's last complaint).
STDERR_TAIL_BYTES = 2000
# The decoder's whole environment: no key or setting of the server reaches the process that
# reads uploads, and numpy's BLAS reserves no per-thread arenas under its memory limit.
INHERITED_ENV = ("PATH", "PYTHONPATH", "LD_LIBRARY_PATH")
SINGLE_THREADED = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


class _Failed(Exception):
    """A decoder failed its job: `cause` labels chorus_clip_decoder_failures_total."""

    def __init__(self, cause: str, what: str) -> None:
        super().__init__(what)
        self.cause, self.what = cause, what


@dataclass(slots=True, eq=False)  # each one is itself: a set holds the running ones
class _Decoder:
    """A decoder process. Invariant: `stderr_tail` is done once the process has exited."""

    process: asyncio.subprocess.Process
    # Its stderr until it closes, the last STDERR_TAIL_BYTES kept: read all along, so that a
    # decoder writing a lot never blocks on a full pipe.
    stderr_tail: asyncio.Task


class ClipDecoders:
    """Decodes uploads into Clips in at most `processes` decoders at once, each limited to
    `memory_mb` MiB of address space and `cpu_seconds` of CPU, and given `timeout_seconds` of
    wall-clock time per job. Invariants: at most `processes` decoders exist, running or spare,
    and from the first job on, spares are started as soon as fewer exist; a decoder gets exactly
    one job and is reaped after it, whatever happened (a process that read an upload is never
    trusted with another: PyAV 18 corrupts its heap on some valid files); each failure is logged
    and counted once in `failures` under its cause. Nothing starts before the first job; `close`
    kills every decoder."""

    def __init__(self, *, processes: int, memory_mb: int, cpu_seconds: float, timeout_seconds: float,
                 failures: Counter) -> None:
        self.memory_mb, self.cpu_seconds, self.timeout_seconds = memory_mb, cpu_seconds, timeout_seconds
        self._failures = failures
        self._processes = processes
        self._slots = asyncio.Semaphore(processes)
        self._spares: list[_Decoder] = []
        self._running: set[_Decoder] = set()
        self._topping_up = asyncio.Lock()  # one at a time counts what exists, then starts the rest
        self._closed = False

    async def prepare(self, data: bytes, sample_rate: int, *, min_seconds: float, max_seconds: float) -> Clip:
        """`api.voices.clip.prepare_clip` of the upload, run in a decoder. Raises ClipRejected,
        with reason "decoder_failed" when the decoder failed."""
        # NOTE: head and upload go to the pipe apart: one message of megabytes would be another
        # copy of the upload, made on the event loop.
        job = (message_head({"sample_rate": sample_rate, "min_seconds": min_seconds, "max_seconds": max_seconds},
                            len(data)), data)
        async with self._slots:
            if self._closed:
                raise RuntimeError("the clip decoders are closed")
            await self._top_up()
            decoder = self._spares.pop() if self._spares else await self._start()
            self._running.add(decoder)
            try:
                header, payload = await asyncio.wait_for(self._exchange(decoder.process, job, sample_rate, max_seconds),
                                                         self.timeout_seconds)
                return _clip(header, payload, sample_rate, min_seconds, max_seconds)
            except asyncio.TimeoutError:
                failure = _Failed("timeout", f"took longer than {self.timeout_seconds:g} s")
            except _Failed as failed:
                failure = failed
            finally:
                await self._reap(decoder)
                await self._top_up()
        if self._closed:  # killed by close(): no fault of the decoder's
            raise ClipRejected("decoder_failed", "the audio could not be decoded: the server is shutting down")
        raise await self._refusal(decoder, failure)

    async def close(self) -> None:
        self._closed = True
        decoders = self._spares + list(self._running)
        self._spares.clear()
        await asyncio.gather(*(self._reap(decoder) for decoder in decoders))

    async def __aenter__(self) -> ClipDecoders:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def _start(self) -> _Decoder:
        env = {name: os.environ[name] for name in INHERITED_ENV if name in os.environ} | SINGLE_THREADED
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "api.voices.clip_worker", "--memory-mb", str(self.memory_mb),
            "--cpu-seconds", str(self.cpu_seconds), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=env)
        return _Decoder(process, asyncio.create_task(_tail(process.stderr)))

    async def _top_up(self) -> None:
        """Starts spares until `processes` decoders exist."""
        async with self._topping_up:
            while not self._closed and len(self._spares) + len(self._running) < self._processes:
                try:
                    spare = await self._start()
                except OSError as error:  # a job without a spare tries again, and reports it
                    logger.warning("could not start a spare clip decoder: %s", error)
                    return
                if self._closed:  # close() came while it started
                    await self._reap(spare)
                else:
                    self._spares.append(spare)

    async def _exchange(self, process: asyncio.subprocess.Process, job: tuple[bytes, bytes], sample_rate: int,
                        max_seconds: float) -> tuple[dict, bytes]:
        """Sends the job (its message's head, then the upload) and reads the answer; the decoder
        has exited 0 when this returns."""
        try:
            for part in job:  # (not writelines: it joins them)
                process.stdin.write(part)
            await process.stdin.drain()
            process.stdin.close()
        except (BrokenPipeError, ConnectionResetError):
            pass  # it died before reading its job: its exit says why
        try:
            header = json.loads(await _read_part(process.stdout, MAX_HEADER_BYTES))
            payload = await _read_part(process.stdout, 4 * math.floor(max_seconds * sample_rate))
        except asyncio.IncompleteReadError:
            raise self._died(await process.wait()) from None
        except ValueError as error:  # json.JSONDecodeError and UnicodeDecodeError are ValueErrors
            raise _Failed("protocol", f"answered garbage ({error})") from None
        if (code := await process.wait()) != 0:
            raise self._died(code)
        return header, payload

    def _died(self, code: int) -> _Failed:
        if code == -signal.SIGXCPU:
            return _Failed("cpu", f"used more than its {self.cpu_seconds:g} s of CPU")
        if code == EXIT_OUT_OF_MEMORY:
            return _Failed("memory", f"ran out of its {self.memory_mb} MiB of memory")
        if code < 0:
            try:
                return _Failed("crashed", f"stopped (killed by {signal.Signals(-code).name})")
            except ValueError:
                return _Failed("crashed", f"stopped (killed by signal {-code})")
        return _Failed("crashed", f"stopped (exit code {code})")

    async def _reap(self, decoder: _Decoder) -> None:
        with contextlib.suppress(ProcessLookupError):  # close() and the job may both reap it
            decoder.process.kill()
        await decoder.process.wait()
        await decoder.stderr_tail
        self._running.discard(decoder)

    async def _refusal(self, decoder: _Decoder, failure: _Failed) -> ClipRejected:
        self._failures.labels(failure.cause).inc()
        stderr = (await decoder.stderr_tail).decode(errors="replace").strip()
        logger.warning("clip decoder (pid %d) failed (%s): it %s%s", decoder.process.pid, failure.cause, failure.what,
                       f"; its stderr ended: {stderr}" if stderr else "")
        return ClipRejected("decoder_failed", f"the audio could not be decoded: the decoder {failure.what}; the file "
                                              "may be damaged or use an unsupported layout")


async def _read_part(stream: asyncio.StreamReader, limit: int) -> bytes:
    """One length-prefixed part of an answer, refused beyond `limit` bytes before it is read."""
    size = LENGTH.unpack(await stream.readexactly(LENGTH.size))[0]
    if size > limit:
        raise _Failed("protocol", f"answered garbage (a part of {size} bytes, beyond {limit})")
    return await stream.readexactly(size)


def _clip(header: dict, payload: bytes, sample_rate: int, min_seconds: float, max_seconds: float) -> Clip:
    """The answer as a Clip, or its refusal raised; anything else about it is garbage: the
    decoder read the upload, so its answer is checked like one."""
    if isinstance(header, dict) and header.keys() == {"reason", "message"} and header["reason"] in REFUSALS \
            and isinstance(header["message"], str) and not payload:
        raise ClipRejected(header["reason"], header["message"])
    if not (isinstance(header, dict) and header.get("sample_rate") == sample_rate
            and isinstance(header.get("original_seconds"), float) and len(payload) % 4 == 0):
        raise _Failed("protocol", "answered garbage (an answer of neither shape)")
    samples = np.frombuffer(payload, "<f4")
    seconds = samples.size / sample_rate
    if not (min_seconds <= seconds <= min(max_seconds, header["original_seconds"])
            and np.isfinite(samples).all() and np.abs(samples).max() <= 1.0):
        raise _Failed("protocol", "answered garbage (samples out of bounds)")
    return Clip(samples, sample_rate, original_seconds=header["original_seconds"])


async def _tail(stream: asyncio.StreamReader) -> bytes:
    tail = b""
    while chunk := await stream.read(4096):
        tail = (tail + chunk)[-STDERR_TAIL_BYTES:]
    return tail
