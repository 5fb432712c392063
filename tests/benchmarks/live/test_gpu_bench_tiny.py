"""`benchmarks/gpu.sh --tiny` on the CPU: every phase of the GPU benchmark runs and reports sane figures."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton")
REPO = Path(__file__).resolve().parents[3]


def test_tiny_run_goes_through_every_phase(tmp_path):
    env = dict(os.environ, CHORUS_CACHE=str(tmp_path / "cache"), PYTHON=sys.executable)
    done = subprocess.run([str(REPO / "benchmarks" / "gpu.sh"), "--tiny", "--out", str(tmp_path)], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1].startswith("phases:"), "the table must come last"
    [result] = tmp_path.glob("gpu-tiny-*.json")
    report = json.loads(result.read_text())
    assert report["machine"]["commit"]
    assert report["correctness"]["attention_max_abs_error"] < 3e-2
    assert report["correctness"]["step_rel_error"] < 5e-2
    assert report["correctness"]["graph_sampling_mismatches"] == 0
    assert report["correctness"]["codec_graph_max_abs_error"] < 1e-4
    assert report["correctness"]["qwen3_graph_emit_mismatches"] == 0
    assert report["correctness"]["qwen3_graph_emit_steps"] >= 1
    assert report["correctness"]["qwen3_codec_step_graph_padded_relative_error"] <= 1e-4
    assert report["correctness"]["qwen3_codec_step_graph_unpadded_relative_error"] <= 1e-2
    assert report["correctness"]["qwen3_engine_graphs_streams_within_1pct"] == 8
    assert list(report["phases"])[0] == "qwen3_checks_s"  # before the checkpoint: the untried paths first
    [prefill] = report["prefill"]
    assert prefill["backend"] == "torch" and prefill["step_ms"] > 0 and prefill["rel_error"] == 0
    assert [r["batch"] for r in report["decode"]] == [1, 8]
    assert all(r["step_ms"] > 0 and r["floor_ms"] > 0 for r in report["decode"])
    for key in ("engine_load", "baseline_load"):
        rows = report[key]
        assert [r["concurrency"] for r in rows] == [1, 4], key
        for row in rows:
            assert "error" not in row, row
            assert row["failed"] == 0 and row["requests"] >= row["concurrency"]
            assert row["audio_s_per_wall_s"] > 0 and row["ttfa_p50"] > 0
    assert all(r["requests"] == 2 * r["concurrency"] for r in report["engine_load"])  # closed loop, 2 each
    assert (tmp_path / result.name.replace(".json", ".md")).is_file()
