"""The intelligibility benchmark end to end on two sentences, and its word error arithmetic."""
from __future__ import annotations

import json

import pytest

from benchmarks.asr import WordErrors, edit_distance, normalize_words
from tests.voice_packages import require_voice_packages


def test_word_errors_count_edits_over_reference_words():
    assert normalize_words("It's 3:30, Mr. O'Neil - well-known!") == ["it's", "mr", "o'neil", "well", "known"]
    assert edit_distance("a b c d".split(), "a x c".split()) == 2  # one substitution, one deletion
    errors = WordErrors()
    errors.add("the cat sat", "the cat sat")
    errors.add("on the mat", "on a mat today")
    assert (errors.errors, errors.words) == (2, 6)
    assert errors.rate == pytest.approx(1 / 3)


@pytest.mark.slow
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
