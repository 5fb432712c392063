"""The intelligibility gate end to end on one sentence of each part, the float and the int8
decoder (its interval arithmetic is tests/benchmarks/test_intelligibility_gate.py's)."""
from __future__ import annotations

import json

import pytest

from tests.voice_packages import require_voice_packages


def test_a_short_run_writes_the_verdict(tmp_path, chorus_cache):
    require_voice_packages()
    pytest.importorskip("pocketsphinx")
    from benchmarks.intelligibility_gate import main

    main(["--limit", "1", "--configs", "istft-onnxruntime:float32", "istft-int8:float32", "--streams", "2",
          "--threads", "1", "--out", str(tmp_path)])
    report = json.loads(next(tmp_path.glob("intelligibility-gate-*.json")).read_text())
    reference, int8 = report["configs"]
    assert report["sentences"] == 3 and list(report["part_sizes"].values()) == [1, 1, 1]
    assert (reference["name"], int8["name"]) == ("istft-onnxruntime:float32", "istft-int8:float32")
    assert len(int8["errors"]) == len(int8["heard"]) == 3 and reference["words"] == int8["words"]
    assert int8["interval_low"] <= int8["points_over_reference"] <= int8["interval_high"]
    assert int8["passes"] == (int8["interval_high"] <= 1.0)
    assert "| istft-int8:float32 |" in next(tmp_path.glob("intelligibility-gate-*.md")).read_text()
