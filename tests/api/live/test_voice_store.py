"""The voice library below HTTP: concurrent uploads of one name, atomic folders, what a start
finds on disk. Uploads are decoded in decoder processes, hence the live tier."""
from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

from api.app import clip_decoders
from api.config.settings import ApiSettings
from api.http.metrics import ApiMetrics
from api.voices.library import LibraryLimits, VoiceLibrary, VoiceRefused
from api.voices.store import VoiceFolder
from model.config import ModelConfig
from model.loader import load_frontend
from tests.api.voice_clips import GOLDEN, wav_bytes


@pytest.fixture(scope="module")
def frontend(chorus_cache):
    return load_frontend(ModelConfig(model="tiny-random-qwen3-base"))


@pytest.fixture(scope="module")
def clip() -> bytes:
    with np.load(GOLDEN) as golden:
        return wav_bytes(golden["base_clip"])


def in_thread(function, *args):
    return asyncio.get_running_loop().run_in_executor(None, function, *args)


def voice_folders(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir())


def with_library(root: Path, frontend, job, limits: LibraryLimits | None = None):
    """`job(library)` run on an event loop of its own, with the server's clip decoders."""
    async def run():
        async with clip_decoders(ApiSettings(), ApiMetrics(lambda: None)) as decoders:
            return await job(VoiceLibrary.open(root, frontend, in_thread, limits, decoders))
    return asyncio.run(run())


def test_concurrent_uploads_of_one_name_settle_to_one(tmp_path, frontend, clip):
    async def race(library):
        return await asyncio.gather(*(library.create(None, name, clip) for name in ("Ann", "ann", "ANN ", "Ann")),
                                    return_exceptions=True)

    results = with_library(tmp_path, frontend, race)
    made = [r for r in results if not isinstance(r, Exception)]
    refused = [r for r in results if isinstance(r, VoiceRefused)]
    assert len(made) == 1 and len(refused) == 3 and all(r.status == 409 for r in refused)
    assert voice_folders(tmp_path) == [made[0].id]


def test_the_per_owner_limit_counts_uploads_in_progress(tmp_path, frontend, clip):
    async def race(library):
        return library, await asyncio.gather(*(library.create("owner", f"v{i}", clip) for i in range(4)),
                                             return_exceptions=True)

    library, results = with_library(tmp_path, frontend, race, LibraryLimits(max_voices_per_owner=2))
    assert sum(not isinstance(r, Exception) for r in results) == 2
    assert sorted(r.status for r in results if isinstance(r, VoiceRefused)) == [429, 429]
    assert len(library.voices("owner")) == 2 and library.voices(None) == []


def test_a_failed_write_leaves_nothing_and_a_start_cleans_leftovers(tmp_path, frontend, clip):
    voice = with_library(tmp_path, frontend, lambda library: library.create(None, "Ann", clip))
    broken = voice.clone.arrays | {"bad": np.array([object()], dtype=object)}
    unsaveable = type(voice)(**{**voice.__dict__, "id": "voice_" + "1" * 24,
                                "clone": type(voice.clone)(voice.model, voice.mode, broken)})
    with pytest.raises(Exception):
        VoiceFolder(tmp_path).write(unsaveable, np.zeros(10, dtype=np.float32), 24000)
    assert voice_folders(tmp_path) == [voice.id]
    (tmp_path / (".deleted-" + voice.id)).mkdir()  # a delete cut short
    (tmp_path / "notes.txt").write_text("not a voice")
    voices, skipped = VoiceFolder(tmp_path).load()
    assert [v.id for v in voices] == [voice.id] and skipped == []
    assert voice_folders(tmp_path) == ["notes.txt", voice.id]
    again = voices[0]
    assert (again.name, again.mode, again.seconds) == (voice.name, voice.mode, voice.seconds)
    np.testing.assert_array_equal(again.clone.arrays["speaker_vector"], voice.clone.arrays["speaker_vector"])


@pytest.mark.parametrize("damage", ["metadata", "format", "id", "clip"])
def test_a_damaged_voice_is_skipped_with_the_reason(tmp_path, frontend, clip, damage):
    voice = with_library(tmp_path, frontend, lambda library: library.create(None, "Ann", clip))
    folder = tmp_path / voice.id
    meta = folder / "voice.json"
    if damage == "metadata":
        meta.write_text("{")
    elif damage == "format":
        meta.write_text(meta.read_text().replace('"format": 1', '"format": 99'))
    elif damage == "id":
        meta.write_text(meta.read_text().replace(voice.id, "voice_" + "2" * 24))
    else:
        (folder / "clip.wav").unlink()
    voices, skipped = VoiceFolder(tmp_path).load()
    assert voices == [] and len(skipped) == 1 and skipped[0].startswith(str(folder))


def test_a_library_without_decoders_only_looks_voices_up(tmp_path, frontend, clip):
    """What `chorus say` opens: its voices are found, and it starts no decoder to make one."""
    voice = with_library(tmp_path, frontend, lambda library: library.create(None, "Ann", clip))
    library = VoiceLibrary.open(tmp_path, frontend, in_thread)
    assert library.find(None, "ann").id == voice.id
    with pytest.raises(RuntimeError, match="only looks voices up"):
        asyncio.run(library.create(None, "Bo", clip))
