"""engine/allocator.py: which LD_PRELOAD the engine core process starts with."""
from __future__ import annotations

import os

import pytest

from engine import allocator
from engine.allocator import core_preload, preloaded
from engine.config import EngineConfig

TCMALLOC = "libtcmalloc_minimal.so.4"


@pytest.fixture
def has_tcmalloc(monkeypatch):
    monkeypatch.setattr(allocator, "find_tcmalloc", lambda: TCMALLOC)


@pytest.fixture
def no_tcmalloc(monkeypatch):
    monkeypatch.setattr(allocator, "find_tcmalloc", lambda: None)


def test_auto_preloads_tcmalloc_into_a_cpu_core_only(has_tcmalloc):
    assert core_preload("auto", "cpu", {}) == TCMALLOC
    assert core_preload("auto", "cuda", {}) is None  # a GPU step's host work is not the bottleneck
    assert core_preload("tcmalloc", "cuda", {}) == TCMALLOC
    assert core_preload("system", "cpu", {}) is None


def test_the_callers_own_preloads_are_kept_and_tcmalloc_is_not_added_twice(has_tcmalloc):
    assert core_preload("auto", "cpu", {"LD_PRELOAD": "libfoo.so"}) == f"{TCMALLOC} libfoo.so"
    assert core_preload("auto", "cpu", {"LD_PRELOAD": "/opt/lib/libtcmalloc.so.4"}) is None


def test_without_tcmalloc_auto_keeps_the_system_malloc_and_tcmalloc_is_refused(no_tcmalloc):
    assert core_preload("auto", "cpu", {}) is None
    with pytest.raises(RuntimeError, match="--allocator system"):
        core_preload("tcmalloc", "cpu", {})
    with pytest.raises(ValueError, match="allocator"):
        core_preload("jemalloc", "cpu", {})
    with pytest.raises(ValueError, match="allocator"):
        EngineConfig(allocator="jemalloc")


@pytest.mark.parametrize("before", [None, "libfoo.so"])
def test_the_preload_lasts_only_while_the_process_starts(monkeypatch, before):
    if before is None:
        monkeypatch.delenv("LD_PRELOAD", raising=False)
    else:
        monkeypatch.setenv("LD_PRELOAD", before)
    with preloaded("libbar.so"):
        assert os.environ["LD_PRELOAD"] == "libbar.so"
    assert os.environ.get("LD_PRELOAD") == before
    with preloaded(None):
        assert os.environ.get("LD_PRELOAD") == before
