"""The throughput benchmark's presets, medians and targets (its quick run, engine against
transformers, is tests/benchmarks/long/test_throughput_smoke.py's)."""
from __future__ import annotations

import pytest

from benchmarks.throughput import (
    ENGINE,
    GENERATE_BATCH,
    PRESETS,
    STATIC_GENERATE,
    Measurement,
    median_runs,
    parse_args,
    targets,
)


def test_presets_fill_only_the_flags_not_given():
    args = parse_args(["--quick", "--streams", "3", "5"])
    assert args.streams == [3, 5]
    assert (args.prompt_len, args.new_tokens) == (PRESETS["quick"]["prompt_len"], PRESETS["quick"]["new_tokens"])
    full = parse_args([])
    assert (full.streams, full.prompt_len, full.new_tokens, full.threads) == ([16, 64], 40, 200, 2)


def run(system: str, streams: int, tokens_per_second: float, overhead: float = 0.0, repeat: int = 0) -> Measurement:
    return Measurement(system, streams, int(tokens_per_second), 1.0, {"overhead_fraction": overhead}, repeat)


def test_median_runs_pick_one_whole_run_per_system_and_stream_count():
    runs = [
        run(ENGINE, 16, 300, repeat=0), run(GENERATE_BATCH, 16, 50, repeat=0),
        run(ENGINE, 16, 100, overhead=0.7, repeat=1), run(GENERATE_BATCH, 16, 40, repeat=1),
        run(ENGINE, 16, 200, overhead=0.4, repeat=2), run(GENERATE_BATCH, 16, 60, repeat=2),
        run(ENGINE, 64, 900, repeat=0), run(ENGINE, 64, 800, repeat=1),
    ]
    medians = median_runs(runs)
    assert [(m.system, m.streams, m.tokens, m.repeat) for m in medians] == [
        (ENGINE, 16, 200, 2), (GENERATE_BATCH, 16, 50, 0), (ENGINE, 64, 800, 1),
    ]
    assert medians[0].details["overhead_fraction"] == 0.4  # the figures of that same run


def test_targets_read_the_issue_bounds():
    checks = targets([
        run(ENGINE, 16, 3000), run(GENERATE_BATCH, 16, 250), run(STATIC_GENERATE, 16, 3100),
        run(ENGINE, 64, 6000, overhead=0.12),
    ])
    assert [(c["value"], c["met"]) for c in checks] == [
        (pytest.approx(12.0), True), (pytest.approx(3000 / 3100), False), (0.12, True),
    ]
    assert all(c["value"] is None for c in targets([run(ENGINE, 2, 100)]))

