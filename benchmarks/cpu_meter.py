"""CPU used over a stretch of a benchmark: by the server's processes, and by the whole machine.

Read from Linux's /proc: a server's session (benchmarks/server_process.py runs each server in its
own, so an engine core process counts with its API process), and /proc/stat for every core.
"""
from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass
from pathlib import Path


def machine_busy_seconds() -> float:
    """Seconds every core together spent busy since boot (all but idle and iowait)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    # NOTE: guest time is already inside user time: only the first eight fields are summed.
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


@dataclass(slots=True)
class CpuSample:
    wall: float
    server: float
    machine: float


class CpuMeter:
    """Starts at `start`, ends at `end` (or at `stop`, when `end` was not called), and reports at
    `stop`: the CPU the server's processes and the machine used in between, as percent of one
    core (200 %: both cores of the 2-core machine busy)."""

    def __init__(self, server_cpu_seconds) -> None:
        self._server = server_cpu_seconds  # () -> CPU seconds of the server's processes so far
        self._start: CpuSample | None = None
        self._end: CpuSample | None = None

    def _sample(self) -> CpuSample:
        return CpuSample(time.monotonic(), self._server(), machine_busy_seconds())

    def start(self) -> None:
        self._start = self._sample()

    def end(self) -> None:
        """Ends the stretch now (a level's measured window), to be reported by `stop` later."""
        self._end = self._sample()

    async def over(self, starts_in: float, seconds: float) -> None:
        """Starts `starts_in` seconds from now and ends `seconds` later (a level's window)."""
        await asyncio.sleep(starts_in)
        self.start()
        await asyncio.sleep(seconds)
        self.end()

    def stop(self, audio_seconds: float) -> dict:
        """The figures from `start` to `end` (or to now), with `audio_seconds` of audio served in that time."""
        end = self._end or self._sample()
        wall = end.wall - self._start.wall
        server = end.server - self._start.server
        return {"server_cpu_pct": 100.0 * server / wall if wall > 0 else None,
                "machine_cpu_pct": 100.0 * (end.machine - self._start.machine) / wall if wall > 0 else None,
                "audio_s_per_cpu_s": audio_seconds / server if server > 0 else None}
