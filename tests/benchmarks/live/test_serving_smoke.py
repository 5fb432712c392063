"""`python -m benchmarks.serving --quick` end to end: the three real servers, result files, and
figures that agree with each other."""
from __future__ import annotations

import json

import pytest

from benchmarks.serving import QUICK, main
from benchmarks.serving_metrics import serving_capacity
from benchmarks.trace import percentile
from tests.voice_packages import require_voice_packages

require_voice_packages()
pytest.importorskip("flask")  # Piper's server (piper-tts's `http` extra, in the dev extra)


# Starts `chorus serve --model joe`, Piper's server and the sentence server, one after the other (2-3 min).
def test_quick_run_chorus_against_piper(tmp_path, chorus_cache):
    report = main(["--quick", "--out", str(tmp_path)])
    written = json.loads(next(tmp_path.glob("serving-*.json")).read_text())
    markdown = next(tmp_path.glob("serving-*.md")).read_text()
    assert next(tmp_path.glob("serving-*.png")).stat().st_size > 0
    assert written["command"].startswith("python -m benchmarks.serving --quick")
    assert written["machine"]["commit"] and written["date"]
    assert [s["system"] for s in written["systems"]] == ["chorus", "piper", "piper-sentences"]
    assert "| chorus | 1 streams |" in markdown and "| piper | 1 streams |" in markdown
    assert "| piper-sentences | 4 listeners |" in markdown and "Paced capacity (listeners): chorus" in markdown
    assert len(written["targets"]) == 16 and "| target | measured | met |" in markdown

    loads = report["systems"][0]["loads"]
    for system in report["systems"]:
        assert system["loads"] == loads  # Piper gets Chorus's Poisson rates and burst sizes
        assert [lv["load"] for lv in system["closed_loop"]] == QUICK["concurrency"]
        assert system["capacity_streams"] == serving_capacity(system["closed_loop"])
        single = system["closed_loop"][0]
        assert single["requests"] >= 1 and sum(single["errors"].values()) == 0 and single["refused_pct"] == 0
        assert [lv["load"] for lv in system["paced"]] == QUICK["paced"] and system["paced"][0]["requests"] >= 1
        assert len(system["paced"][0]["traces"]) >= QUICK["paced"][0]  # every listener asked during the warm-up
        for lv in system["closed_loop"] + system["paced"]:  # every client listens through the window
            assert lv["held_pct"] >= 95 and lv["window_seconds"] == QUICK["level_seconds"]
        for lv in system["closed_loop"] + system["paced"] + system["poisson"] + system["bursts"]:
            # The server's CPU is part of the machine's; the audio it served per CPU-second.
            assert 0 < lv["server_cpu_pct"] <= lv["machine_cpu_pct"] + 5
            if any(t["ok"] for t in lv["traces"]):
                assert lv["audio_s_per_cpu_s"] > 0
            if lv["ttfa_p50"] is not None:
                assert 0 < lv["ttfa_p50"] <= lv["ttfa_p95"] <= lv["ttfa_p99"]
                assert lv["viable_pct_0ms"] <= lv["viable_pct_200ms"]
            served = [t for t in lv["traces"] if t["ok"]]
            start, end = lv.get("window", (float("-inf"), float("inf")))
            audio = sum(n for t in served for at, n in t["chunks"] if start <= at < end)
            rate = 24000 if system["system"] == "chorus" else 22050
            assert lv["audio_s_per_wall_s"] == pytest.approx(audio / rate / lv.get("window_seconds", lv["wall_seconds"]))
            assert lv["requests"] == sum(t["counted"] for t in lv["traces"])
        # Every eval sentence is a second or more of speech from either system.
        assert all(sum(n for _, n in t["chunks"]) > 0.5 * 22050 for t in single["traces"])
        ttfas = [next(at for at, n in t["chunks"] if n) - t["sent"] for t in single["traces"] if t["counted"]]
        assert single["ttfa_p50"] == pytest.approx(percentile(ttfas, 50), abs=2e-3)
        assert [b["load"] for b in system["bursts"]] == loads["burst_sizes"]
    # Chorus's bursts carry the floor under their 429 times: as many bare GETs at once.
    assert all(b["connection_floor_p99_s"] > 0 for b in report["systems"][0]["bursts"])
    assert all("connection_floor_p99_s" not in b for s in report["systems"][1:] for b in s["bursts"])
    assert "as many GET /health at once, p99 ms" in markdown
    assert [r["format"] for r in report["systems"][0]["input_length"]] == ["pcm"]
    assert [r["format"] for r in report["systems"][1]["input_length"]] == ["wav"]
    assert [r["format"] for r in report["systems"][2]["input_length"]] == ["pcm"]
    for system in report["systems"]:
        row = system["input_length"][0]
        assert row["ratio"] == pytest.approx(row["thirty_sentences_ttfa_p50"] / row["one_sentence_ttfa_p50"])
