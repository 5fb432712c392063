from __future__ import annotations

import functools
import os
import subprocess
from pathlib import Path

import torch

# NOTE: must happen before anything imports triton (transformers does, during collection): with
# no GPU, Triton kernels run in its interpreter, which is how their tests run on CPU machines.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402


def pytest_configure(config):
    # Two cores here; tests are small, and oversubscribed BLAS threads only slow them down.
    torch.set_num_threads(min(2, torch.get_num_threads()))


# --- The two tiers ------------------------------------------------------------------------------
# `make test` runs every test; `make test-fast` (`-m "not slow"`) leaves out the `slow` tier. A
# test's tier follows from where it lives and what it uses, never from a marker written on it:
# it is slow when it lives under a folder named in SLOW_FOLDERS, or uses a fixture in
# LIVE_FIXTURES (directly or through another fixture).
#   live/  it starts a server, a subprocess, a browser or Ray, or drives a real client over sockets
#          (e.g. tests/api/live/: the suites against uvicorn servers);
#   long/  it starts none of those but runs for seconds (a benchmark's quick run, speech
#          recognition, a parity check at full size).
# Each package keeps its own live/ and long/ sub-folders; the package's conftest.py and helper
# modules stay where they are (a conftest.py applies to the folders below it).
SLOW_FOLDERS = frozenset({"live", "long"})
# The fixtures that start a server (tests/api/conftest.py). A suite that starts its own lives in live/.
LIVE_FIXTURES = frozenset({"server", "joe_server"})
TESTS = Path(__file__).resolve().parent


def slow_tier_reason(item) -> str | None:
    """Why `item` is in the slow tier, or None when it is in the fast one."""
    try:
        folders = item.path.resolve().relative_to(TESTS).parts[:-1]
    except ValueError:  # not under tests/
        folders = ()
    if found := SLOW_FOLDERS.intersection(folders):
        return f"under {sorted(found)[0]}/"
    if found := LIVE_FIXTURES.intersection(getattr(item, "fixturenames", ())):
        return f"uses the fixture {sorted(found)[0]!r}"
    return None


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(config, items):
    for item in items:
        if slow_tier_reason(item) is not None:
            item.add_marker(pytest.mark.slow)


def selects_no_slow_test(config) -> bool:
    """Whether the run leaves out the whole slow tier: `-m "not slow"` (what `make test-fast` runs;
    richer expressions collect everything and let `-m` deselect)."""
    return " ".join((config.getoption("markexpr", "") or "").split()) == "not slow"


def pytest_ignore_collect(collection_path, config):
    # A run that deselects the slow tier does not even import its modules (their clients, Ray,
    # browsers and benchmark harnesses take seconds to import).
    if (collection_path.name in SLOW_FOLDERS and TESTS in collection_path.parents and collection_path.is_dir()
            and selects_no_slow_test(config)):
        return True
    return None


# --- The fast tier starts nothing ----------------------------------------------------------------
# A run with no slow-tier test in it (`make test-fast`, or any selection of fast tests) must start
# no server and no process: while it runs, starting a subprocess (subprocess, asyncio, os.system,
# os.fork), a multiprocessing process or a uvicorn server raises, and fails the test even if the
# code under test swallowed the error. Runs that include slow tests are not guarded (their live
# servers may start processes at any time).
# Short queries of the system that libraries make (ctypes.util.find_library runs ldconfig or a
# compiler; reports note the git commit) are no server and pass.
TOOLS_ALLOWED = frozenset({"git", "ldconfig", "ldconfig.real", "gcc", "cc", "ld", "objdump", "uname"})


class FastTierViolation(RuntimeError):
    pass


_violations: list[str] = []


def _refuse(what: str) -> None:
    message = (f"{what} in the fast tier. A test that starts a server, a subprocess, a browser or Ray "
               f"belongs under a `live/` folder of its package (a long one under `long/`): see the tiers "
               f"in tests/conftest.py. `make test` runs it there.")
    _violations.append(message)
    raise FastTierViolation(message)


def _program(args, executable) -> str:
    if executable is not None:
        first = executable
    elif isinstance(args, (str, bytes, os.PathLike)):
        first = os.fsdecode(args).split()[0] if os.fsdecode(args).split() else ""
    else:
        first = os.fsdecode(list(args)[0]) if args else ""
    return os.path.basename(os.fsdecode(first))


def _guards() -> list[tuple[object, str, object]]:
    """(owner, attribute, replacement) for everything that starts a process or a server."""
    import multiprocessing.process

    guards = []

    def add(owner, name, check):
        original = getattr(owner, name)

        @functools.wraps(original)
        def guarded(*args, **kwargs):
            check(*args, **kwargs)
            return original(*args, **kwargs)

        guards.append((owner, name, guarded))

    def popen(self, args, executable, *rest, **kwargs):
        if _program(args, executable) not in TOOLS_ALLOWED:
            _refuse(f"starting the subprocess {args!r}")

    add(subprocess.Popen, "_execute_child", popen)
    add(multiprocessing.process.BaseProcess, "start",
        lambda self, *a, **k: _refuse(f"starting the multiprocessing process {self.name!r}"))
    add(os, "system", lambda command, *a, **k: _refuse(f"os.system({command!r})"))
    add(os, "fork", lambda *a, **k: _refuse("os.fork()"))
    try:
        import uvicorn
    except ImportError:
        pass
    else:
        add(uvicorn.Server, "__init__", lambda *a, **k: _refuse("starting a uvicorn server"))
    return guards


@pytest.hookimpl(wrapper=True)
def pytest_runtestloop(session):
    fast = session.items and not any(item.get_closest_marker("slow") for item in session.items)
    originals = []
    if fast and not session.config.option.collectonly:
        for owner, name, guarded in _guards():
            originals.append((owner, name, getattr(owner, name)))
            setattr(owner, name, guarded)
    try:
        return (yield)
    finally:
        for owner, name, original in reversed(originals):
            setattr(owner, name, original)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if _violations:
        messages = list(dict.fromkeys(_violations))
        _violations.clear()
        if report.passed:  # the code under test caught the error: the test fails all the same
            report.outcome = "failed"
            report.longrepr = "\n".join(messages)
    return report


@pytest.fixture(scope="session")
def chorus_cache(tmp_path_factory):
    """A private model cache so tests never depend on (or pollute) the user's ~/.cache."""
    path = tmp_path_factory.mktemp("chorus-cache")
    old = os.environ.get("CHORUS_CACHE")
    os.environ["CHORUS_CACHE"] = str(path)
    yield path
    if old is None:
        os.environ.pop("CHORUS_CACHE", None)
    else:
        os.environ["CHORUS_CACHE"] = old


# Any fixed value: torch seeds each process at random, so without it an unseeded draw differs
# from run to run.
_TEST_SEED = 67280421310721


@pytest.fixture(autouse=True)
def same_random_start():
    """Every test's body starts from the same torch random state, whatever ran before it and in
    whichever process. The tiny random models sample unseeded requests from that state, and may
    (about one request in a thousand) end a speech before its first frame: a socket test got no
    audio once in CI that way. Now such a test passes or fails the same way on every run (a
    server in another process, `chorus serve` started by a test, still draws from its own)."""
    torch.manual_seed(_TEST_SEED)
