"""The intelligibility benchmark end to end on two sentences (its word error arithmetic is
tests/benchmarks/test_intelligibility_smoke.py's)."""
from __future__ import annotations

import json

import pytest

from tests.voice_packages import require_voice_packages


def test_quick_run_writes_the_table(tmp_path, chorus_cache):
    require_voice_packages()
    pytest.importorskip("pocketsphinx")
    from benchmarks.intelligibility import main

    main(["--limit", "2", "--runs", "1", "--concurrency", "2", "--threads", "1", "--out", str(tmp_path)])
    report = json.loads(next(tmp_path.glob("intelligibility-*.json")).read_text())
    names = [row["name"] for row in report["systems"]]
    assert names[:2] == ["teacher (Piper)", "teacher, no noise"]
    assert "istft decoder" in names[2] and "hifigan decoder" in names[3] and "tiny-random" in names[4]
    assert all(0.0 <= row["wer"] <= 2.0 for row in report["systems"])
    assert len(report["durations"]["per_sentence"]) == 2
    assert report["concurrent"][0]["streams"] == 2
    assert "| concurrent streams |" in next(tmp_path.glob("intelligibility-*.md")).read_text()
