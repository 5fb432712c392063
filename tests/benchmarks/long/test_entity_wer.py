"""The entity WER benchmark's core on two sentences of evaluation/entities.tsv: all three inputs
synthesized by `joe`, transcribed and scored (no WER threshold: the figures are the benchmark's)."""
from __future__ import annotations

import pytest

from tests.voice_packages import require_voice_packages


def test_two_sentences_give_a_word_error_rate_for_each_input(chorus_cache):
    require_voice_packages()
    pytest.importorskip("pocketsphinx")
    from benchmarks.entity_wer import ENTITY, RAW, WRITTEN_OUT, measure, render, report
    from evaluation import entity_sentences

    pairs = entity_sentences()[:2]
    results = measure(pairs, threads=1)
    assert [r.name for r in results] == [ENTITY, WRITTEN_OUT, RAW]
    assert all(0.0 <= r.wer <= 2.0 and len(r.heard) == 2 for r in results)
    meta = {"date": "today", "commit": "HEAD", "command": "test", "threads": 1, "machine": "test",
            "load_average": "0", "wall_seconds": 0.0}
    assert "| entity input (normalized) |" in render(report(pairs, results, meta))
