"""Compiles a kernel's C source of this folder into a shared library on first use, and loads it.

Every kernel here is a row kernel: `status = f(plan, rows, row stride, noise, noise stride, out)`,
the plan a struct of the kernel's own (`row_kernel` binds it). A library is built for the CPU it
runs on (`-march=native`: the kernels' loops are vectorised for the widest unit it has) and cached
under a name made of the sources', the compiler's and the CPU's digest, so a changed source or
header, another compiler or another CPU model builds anew and a cached one is never stale. It is
built into a temporary name and renamed, so processes that build at once never load half a file.
With no compiler, a failed build, or `CHORUS_NATIVE_KERNELS=0`, `load` returns None and the caller
keeps its torch path: a native kernel only ever makes a path faster, never possible.
"""
from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import platform
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from functools import cache
from pathlib import Path

log = logging.getLogger(__name__)

SOURCES = Path(__file__).parent
# NOTE: no -ffast-math: the kernels' sums and orders follow torch's, which reassociation would
# break. -fno-trapping-math changes no value (nothing here reads the floating-point flags); it
# lets the float-to-int conversions of their exp vectorise.
FLAGS = ("-O3", "-std=c11", "-shared", "-fPIC", "-march=native", "-fno-trapping-math")
DISABLE = "CHORUS_NATIVE_KERNELS"


def enabled() -> bool:
    return os.environ.get(DISABLE, "1") not in ("0", "false", "no", "off")


def cache_dir() -> Path:
    """`CHORUS_NATIVE_CACHE`, else chorus/native under the user's cache folder."""
    if explicit := os.environ.get("CHORUS_NATIVE_CACHE"):
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "chorus" / "native"


def compiler() -> list[str]:
    return shlex.split(os.environ.get("CC", "cc"))


@cache
def _compiler_identity(command: tuple[str, ...]) -> str | None:
    """The compiler's version line, or None when there is no working compiler."""
    if shutil.which(command[0]) is None:
        return None
    try:
        done = subprocess.run([*command, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.splitlines()[0] if done.returncode == 0 and done.stdout else None


@cache
def load(name: str) -> ctypes.CDLL | None:
    """The library of `<name>.c` in this folder (built now if no cached one matches), or None."""
    if not enabled():
        return None
    command = tuple(compiler())
    identity = _compiler_identity(command)
    if identity is None:
        log.warning("no C compiler (%s): the %s kernel falls back to torch ops", shlex.join(command), name)
        return None
    source = SOURCES / f"{name}.c"
    texts = [source.read_bytes(), *(header.read_bytes() for header in sorted(SOURCES.glob("*.h")))]
    digest = hashlib.sha256(
        b"\0".join([*texts, identity.encode(), " ".join(FLAGS).encode(), cpu_identity().encode()])
    ).hexdigest()[:16]
    library = cache_dir() / f"{name}-{digest}.so"
    if not library.exists():
        try:
            _build(command, source, library)
        except (OSError, subprocess.SubprocessError) as error:
            log.warning("building the %s kernel failed, it falls back to torch ops: %s", name, error)
            return None
    try:
        return ctypes.CDLL(str(library))
    except OSError as error:  # a cached file this process cannot load (truncated by a full disk, say)
        log.warning("loading the %s kernel failed, it falls back to torch ops: %s", name, error)
        return None


@cache
def cpu_identity() -> str:
    """What `-march=native` builds for: the CPU's model and feature flags (Linux), else its name."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        lines = []
    fields = ("model name", "flags", "CPU implementer", "CPU part", "Features")
    described = sorted({line for line in lines if line.split(":")[0].strip() in fields})
    return "\n".join(described) or f"{platform.machine()} {platform.processor()}"


@cache
def row_kernel(name: str, symbol: str) -> Callable[..., int] | None:
    """`symbol` of `<name>.c` with the row kernels' signature, or None where it is not built."""
    library = load(name)
    if library is None:
        return None
    function = getattr(library, symbol)
    function.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64,
                         ctypes.c_void_p]
    function.restype = ctypes.c_int
    return function


def _build(command: tuple[str, ...], source: Path, library: Path) -> None:
    library.parent.mkdir(parents=True, exist_ok=True)
    handle, partial = tempfile.mkstemp(dir=library.parent, prefix=library.stem, suffix=".partial")
    os.close(handle)
    try:
        done = subprocess.run([*command, *FLAGS, "-o", partial, str(source), "-lm"],
                              capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise subprocess.SubprocessError(done.stderr.strip() or f"{command[0]} exited {done.returncode}")
        os.replace(partial, library)
    finally:
        if os.path.exists(partial):
            os.unlink(partial)
