"""The throughput benchmark's quick run end to end: the engine against transformers' generate at
two stream counts (seconds). Its presets, medians and targets are
tests/benchmarks/test_throughput_smoke.py's."""
from __future__ import annotations

import json

import pytest

from benchmarks.throughput import ENGINE, GENERATE_BATCH, STATIC_GENERATE, main

STREAMS = (2, 3)


@pytest.fixture(scope="module")
def quick_run(chorus_cache, tmp_path_factory):
    out = tmp_path_factory.mktemp("results")
    argv = ["--quick", "--threads", "1", "--streams", *map(str, STREAMS), "--out", str(out)]
    return main(argv), out


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
