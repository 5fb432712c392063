from __future__ import annotations

import os

import torch

# NOTE: must happen before anything imports triton (transformers does, during collection): with
# no GPU, Triton kernels run in its interpreter, which is how their tests run on CPU machines.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402


def pytest_configure(config):
    # Two cores here; tests are small, and oversubscribed BLAS threads only slow them down.
    torch.set_num_threads(min(2, torch.get_num_threads()))


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
