"""Giving freed heap memory back to the operating system (the API process: after long prompts
and after uploads).

glibc's malloc keeps what a thread freed in that thread's arena, and returns it to the system
only when the top of the main heap is free; the prompt pool's workers free hundreds of MB of
onnxruntime buffers after a long prompt (a 4,096-character input without sentence ends: the API
process 324 → 455 MB) that stayed resident for good. `malloc_trim(0)` walks every arena and
releases their free pages (455 → 353 MB, then as before a long prompt; 0.3-2 ms).

A block of megabytes is another matter: glibc serves one from its own mapping, returned the moment
it is freed, but then raises its threshold for doing so to that size, so the next body of as many
megabytes (an upload's) comes from a heap, where what is allocated beside it can keep it resident
after it is freed. `keep_large_blocks_mapped` fixes the threshold.
"""
from __future__ import annotations

import ctypes
import ctypes.util
from functools import lru_cache


# glibc's mallopt parameter, and the size from which a block is always a mapping of its own: an
# upload's body, a decoded clip, the audio of a long speech; not the small blocks of every request.
_M_MMAP_THRESHOLD = -3
LARGE_BLOCK_BYTES = 4 * 2**20


@lru_cache(maxsize=None)
def _libc_function(name: str):
    """glibc's `name`, or None on a C library without it (musl, macOS)."""
    library = ctypes.util.find_library("c")
    try:
        return getattr(ctypes.CDLL(library), name) if library else None
    except (OSError, AttributeError):
        return None


def keep_large_blocks_mapped() -> bool:
    """From now on, every block of LARGE_BLOCK_BYTES or more is a mapping of its own, returned to
    the system when freed; False where the C library has no such setting."""
    mallopt = _libc_function("mallopt")
    return bool(mallopt is not None and mallopt(_M_MMAP_THRESHOLD, LARGE_BLOCK_BYTES))


def give_back_memory() -> bool:
    """Releases the free pages of every malloc arena to the system; False where the C library
    cannot. ctypes releases the GIL for the call: run it on a worker thread."""
    trim = _libc_function("malloc_trim")
    if trim is None:
        return False
    trim(0)
    return True
