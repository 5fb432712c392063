from __future__ import annotations

import json

import numpy as np
import pytest

from tests.voice_packages import require_voice_packages

require_voice_packages()

from model.families.joe.teacher import TeacherScales
from training.joe.make_data import DataConfig, generate
from training.joe.shards import iter_utterances, read_shard, shard_path

SOURCE = '"""Return the number of items waiting in the queue. Split the path into a head and a tail."""\n'


@pytest.fixture(scope="module")
def data_config(tmp_path_factory, chorus_cache) -> DataConfig:
    root = tmp_path_factory.mktemp("docs")
    (root / "sample.py").write_text(SOURCE)
    exclude = root / "eval.txt"
    exclude.write_text("Please hold while I transfer your call.\n")
    return DataConfig(out=tmp_path_factory.mktemp("data"), utterances=3, shard_size=2,
                      exclude=exclude, source_roots=(root,))


def test_smoke_run_writes_and_reads_back(data_config, latent_frontend):
    totals = generate(data_config)
    assert totals["utterances"] == 3 and totals["this_run"]["utterances"] == 3
    assert shard_path(data_config.out, 0).is_file() and shard_path(data_config.out, 1).is_file()
    utterances = list(iter_utterances(data_config.out))
    corpus = [json.loads(line) for line in (data_config.out / "corpus.jsonl").read_text().splitlines()]
    assert [u.text for u in utterances] == [c["text"] for c in corpus]
    assert totals["frames"] == sum(u.num_frames for u in utterances)
    low, high = data_config.length_scale_range
    for utterance in utterances:
        assert low <= utterance.length_scale <= high
        expected = latent_frontend.run(utterance.text, TeacherScales(length_scale=utterance.length_scale))
        np.testing.assert_array_equal(utterance.phoneme_ids, expected.phoneme_ids)
        np.testing.assert_array_equal(utterance.durations, expected.durations)
        # Stored as float16: relative precision ~1e-3 of values up to ~40.
        np.testing.assert_allclose(utterance.latent, expected.latent, rtol=2e-3, atol=2e-3)
        np.testing.assert_allclose(utterance.prior, expected.prior, rtol=2e-3, atol=2e-3)


def test_resume_rewrites_only_missing_shards_identically(data_config):
    generate(data_config)
    first = shard_path(data_config.out, 0)
    before = read_shard(first)
    kept_mtime = shard_path(data_config.out, 1).stat().st_mtime_ns
    first.unlink()
    totals = generate(data_config)
    assert totals["this_run"]["utterances"] == 2
    assert shard_path(data_config.out, 1).stat().st_mtime_ns == kept_mtime
    for old, new in zip(before, read_shard(first)):
        assert old.text == new.text and old.length_scale == new.length_scale
        np.testing.assert_array_equal(old.latent, new.latent)


def test_other_settings_refuse_to_mix(data_config):
    from dataclasses import replace

    with pytest.raises(SystemExit, match="other settings"):
        generate(replace(data_config, seed=1))
