"""What the API process does with its memory once it serves: what starting made is frozen out of
the garbage collector (a full collection held the event loop ~125 ms), and blocks of megabytes
are mapped on their own, so that an upload's body leaves the process when it is freed."""
from __future__ import annotations

import gc

from starlette.testclient import TestClient

from api.app import create_app
from api.config.settings import ApiSettings
from api.http.heap import keep_large_blocks_mapped
from tests.engine.conftest import engine_config


def test_what_starting_made_is_frozen_out_of_the_collector(chorus_cache):
    gc.unfreeze()
    assert gc.get_freeze_count() == 0
    with TestClient(create_app(engine_config("tiny-random", num_blocks=16), ApiSettings())) as client:
        assert client.get("/health").status_code == 200
        assert gc.get_freeze_count() > 10_000  # the model, its tokenizer, the app: all of it
    gc.unfreeze()


def test_large_blocks_can_be_kept_mapped_on_this_c_library():
    assert keep_large_blocks_mapped()  # glibc on every machine this project runs on
