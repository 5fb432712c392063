from __future__ import annotations

import json

import pytest

from benchmarks.throughput import (
    ENGINE,
    GENERATE_BATCH,
    PRESETS,
    STATIC_GENERATE,
    Measurement,
    main,
    median_runs,
    parse_args,
    targets,
)

STREAMS = (2, 3)


@pytest.fixture(scope="module")
def quick_run(chorus_cache, tmp_path_factory):
    out = tmp_path_factory.mktemp("results")
    argv = ["--quick", "--threads", "1", "--streams", *map(str, STREAMS), "--out", str(out)]
    return main(argv), out


def test_presets_fill_only_the_flags_not_given():
    args = parse_args(["--quick", "--streams", "3", "5"])
    assert args.streams == [3, 5]
    assert (args.prompt_len, args.new_tokens) == (PRESETS["quick"]["prompt_len"], PRESETS["quick"]["new_tokens"])
    full = parse_args([])
    assert (full.streams, full.prompt_len, full.new_tokens, full.threads) == ([16, 64], 40, 200, 2)


def test_every_system_makes_exactly_the_requested_tokens(quick_run):
    report, _ = quick_run
    new_tokens = report["workload"]["new_tokens"]
    runs = {(m["system"], m["streams"]): m for m in report["runs"]}
    assert set(runs) == {(s, n) for s in (ENGINE, GENERATE_BATCH, STATIC_GENERATE) for n in STREAMS}
    for (system, streams), m in runs.items():
        assert m["tokens"] == streams * new_tokens, system
        assert m["seconds"] > 0
        assert m["tokens_per_second"] == pytest.approx(m["tokens"] / m["seconds"])
    for streams in STREAMS:
        engine = runs[ENGINE, streams]["details"]
        assert engine["finished_by_reason"] == {"length": streams}
        assert engine["audio_seconds_generated"] > 0  # the codec stage really ran
        step, forward, codec = engine["step_seconds"], engine["forward_seconds"], engine["codec_seconds"]
        assert 0 < forward and 0 < codec and forward + codec < step
        assert engine["overhead_fraction"] == pytest.approx(1 - forward / step)
        assert engine["engine_overhead_fraction"] == pytest.approx(1 - (forward + codec) / step)
        assert runs[GENERATE_BATCH, streams]["details"]["errors"] == []


def test_ratios_compare_the_engine_with_each_system_at_the_same_stream_count(quick_run):
    report, _ = quick_run
    assert len(report["summary"]) == len(report["runs"])  # one repeat: every run is its own median
    engine_tps = {m["streams"]: m["tokens_per_second"] for m in report["runs"] if m["system"] == ENGINE}
    for m in report["summary"]:
        assert m["engine_ratio"] == pytest.approx(engine_tps[m["streams"]] / m["tokens_per_second"])


def test_results_are_written_as_json_and_markdown(quick_run):
    report, out = quick_run
    (json_path,) = out.glob("throughput-*.json")
    assert json.loads(json_path.read_text()) == json.loads(json.dumps(report))
    markdown = json_path.with_suffix(".md").read_text()
    assert report["command"] in markdown
    for m in report["runs"]:
        assert f"| {m['system']} | {m['streams']} | {m['tokens']} |" in markdown
    assert report["machine"]["torch_threads"] == 1


def test_skip_transformers_measures_the_engine_only(chorus_cache, tmp_path):
    report = main(["--quick", "--threads", "1", "--skip-transformers", "--out", str(tmp_path)])
    assert [m["system"] for m in report["runs"]] == [ENGINE]


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
