"""The engine core process's title, as `ps`, `top`, `pgrep -f` and py-spy show it.

`setproctitle` finds the process's argument area by walking back from the first environment
string, so once the first environment variable has been set again (a spawned core re-imports its
parent's main module: under Ray that imports `ray`, which sets RAY_CLIENT_MODE, first in some of
Ray's worker environments), it finds nothing and silently changes nothing. On Linux the kernel
says where that area lies (/proc/self/stat), so the title is then written there directly.
"""
from __future__ import annotations

import ctypes
import logging
import sys

import setproctitle

logger = logging.getLogger("chorus.engine")

_PR_SET_NAME = 15  # prctl: the thread name (/proc/self/comm, 15 bytes)
# /proc/self/stat fields 48 and 49 (arg_start, arg_end), counted after the ")" closing field 2.
_ARG_START, _ARG_END = 45, 46


def set_process_title(title: str) -> None:
    """Names this process `title` (its command line and, on Linux, its short name)."""
    setproctitle.setproctitle(title)
    if sys.platform != "linux" or _command_line() == title:
        return
    try:
        _write_argument_area(title.encode())
    except (OSError, ValueError) as exc:  # a title is worth a log line, never a failed start
        logger.warning("could not set the process title to %r: %s", title, exc)


def _command_line() -> str:
    with open("/proc/self/cmdline", "rb") as cmdline:
        return cmdline.read().split(b"\0", 1)[0].decode(errors="replace")


def _write_argument_area(title: bytes) -> None:
    """Overwrites the original argument strings (which Python copied at startup and no longer
    reads) with `title` and NULs, as setproctitle does once it has found them."""
    with open("/proc/self/stat", "rb") as stat:
        fields = stat.read().rsplit(b")", 1)[1].split()
    start, end = int(fields[_ARG_START]), int(fields[_ARG_END])
    if end - start < 2:
        raise ValueError("no argument area to write to")
    text = title[: end - start - 1]
    ctypes.memmove(start, text.ljust(end - start, b"\0"), end - start)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_NAME, ctypes.c_char_p(title[:15]), 0, 0, 0)
