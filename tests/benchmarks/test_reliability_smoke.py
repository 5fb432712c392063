"""`python -m benchmarks.reliability --quick` end to end against `chorus serve --model joe`: a
storm of abandoned requests, a killed core, a short soak and a drain, with every figure written."""
from __future__ import annotations

import json

import pytest

from benchmarks.reliability import main
from tests.voice_packages import require_voice_packages

require_voice_packages()


@pytest.mark.slow  # two `chorus serve --model joe` starts and about 40 s of load
def test_quick_reliability_run(tmp_path, chorus_cache):
    report = main(["--quick", "--out", str(tmp_path)])
    written = json.loads(next(tmp_path.glob("reliability-*.json")).read_text())
    assert written["storm"]["requests"] == report["storm"]["requests"] == 50
    assert "| storm (32 at a time" in next(tmp_path.glob("reliability-*.md")).read_text()
    # The behaviours, with generous bounds on figures (the benchmark reports the exact ones).
    storm = report["storm"]
    assert storm["kv_blocks_after"] == 0 and storm["api_shm_files_after"] == 0
    assert storm["api_rss_ratio"] < 1.5  # measured 1.04-1.05
    assert storm["ttfa_after_s"] < 5 * storm["ttfa_idle_s"] + 0.5  # measured 0.74-0.77x
    assert report["core_kill"]["told_with"] == "error" and report["core_kill"]["ready_again_s"] < 120
    assert report["soak"]["requests"] > 0 and report["soak"]["errors"] == 0
    assert report["drain"] == {**report["drain"], "sse": "complete", "chunked": "complete", "exit_code": 0}
