"""The engine core process's memory allocator: tcmalloc on the CPU, where the system has it.

A CPU step allocates and frees hundreds of small tensors around larger ones (a convolution's
buffers, a layer's activations). Under glibc's malloc the first small operations after such a
burst are slow: adding 1 to a 16 x 64 tensor right after twenty blocks of a linear layer, SiLU
and RMSNorm on 16 x 64 rows took 16 us against 4 us warm, 6 us under tcmalloc (jemalloc alike);
a 16-stream CPU step of the built-in voice, the
Orpheus-shaped and the Qwen3-TTS test models took 13, 9 and 22 % less time under tcmalloc
(benchmarks/README.md). The core runs in a spawned interpreter, so preloading tcmalloc is one
environment variable at its start; the server process itself keeps the allocator it started
with. Linux only (LD_PRELOAD); elsewhere the system allocator stays.
"""
from __future__ import annotations

import ctypes.util
import logging
import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

logger = logging.getLogger(__name__)

ALLOCATORS = ("auto", "tcmalloc", "system")
INSTALL_HINT = "install libtcmalloc-minimal4 (Debian, Ubuntu) or gperftools-libs (Fedora, RHEL)"


def find_tcmalloc() -> str | None:
    """The system's tcmalloc library (its soname, which the dynamic linker finds), or None."""
    if not sys.platform.startswith("linux"):
        return None
    return ctypes.util.find_library("tcmalloc_minimal") or ctypes.util.find_library("tcmalloc")


def core_preload(allocator: str, device_type: str, environ: Mapping[str, str] = os.environ) -> str | None:
    """The LD_PRELOAD a core process should start with, or None to start it with the
    environment as it is. `auto` preloads tcmalloc into a CPU core when the system has it;
    `tcmalloc` requires it on any device; `system` never preloads."""
    if allocator not in ALLOCATORS:
        raise ValueError(f"allocator must be one of {ALLOCATORS}, got {allocator!r}")
    if allocator == "system" or (allocator == "auto" and device_type != "cpu"):
        return None
    current = environ.get("LD_PRELOAD", "")
    if "tcmalloc" in current:
        return None  # the caller preloaded it already
    library = find_tcmalloc()
    if library is None:
        if allocator == "tcmalloc":
            raise RuntimeError(f"--allocator tcmalloc: no tcmalloc on this system ({INSTALL_HINT}), "
                               "or start with --allocator system")
        return None
    return f"{library} {current}".strip()  # LD_PRELOAD takes a space-separated list


@contextmanager
def preloaded(value: str | None) -> Iterator[None]:
    """LD_PRELOAD set to `value` while the block starts a process (None: left alone); the
    caller's own value is restored after."""
    if value is None:
        yield
        return
    before = os.environ.get("LD_PRELOAD")
    os.environ["LD_PRELOAD"] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("LD_PRELOAD", None)
        else:
            os.environ["LD_PRELOAD"] = before


def allocator_in_use() -> str:
    """`tcmalloc` when this process has it mapped, `system` otherwise (`unknown` off Linux)."""
    try:
        with open("/proc/self/maps") as maps:
            return "tcmalloc" if any("tcmalloc" in line for line in maps) else "system"
    except OSError:
        return "unknown"


def log_allocator(device_type: str) -> None:
    """Says which allocator the core runs with, and on a CPU without tcmalloc how to get it."""
    allocator = allocator_in_use()
    if allocator == "system" and device_type == "cpu":
        logger.info("engine core allocator: the system's malloc (%s: CPU steps took 9-22 %% less time under tcmalloc in our runs)",
                    INSTALL_HINT)
    else:
        logger.info("engine core allocator: %s", allocator)
