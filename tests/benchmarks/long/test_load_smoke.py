from __future__ import annotations

import json

from benchmarks.corpus import CorpusConfig, build_corpus
from benchmarks.load import QUICK, main
from benchmarks.trace import RequestTrace
from model.config import ModelConfig
from model.loader import load_family
from model.families.orpheus.layout import FRAME_TOKENS


# A real sweep of two systems (about 15 s).
def test_quick_run_engine_against_sequential(tmp_path, chorus_cache):
    report = main(["--quick", "--systems", "engine", "sequential", "--engine-mode", "inproc",
                   "--full-sweep", "--no-burst", "--out", str(tmp_path)])
    written = json.loads(next(tmp_path.glob("load-*.json")).read_text())
    assert next(tmp_path.glob("load-*.png")).stat().st_size > 0
    assert "| chorus engine | streams 1 |" in next(tmp_path.glob("load-*.md")).read_text()
    assert [s["key"] for s in written["systems"]] == ["engine", "sequential"]
    assert len(written["targets"]) == 3

    spf = load_family(ModelConfig(model="tiny-random", device="cpu")).codec.samples_per_frame
    corpus = build_corpus(QUICK["corpus_size"], CorpusConfig(max_audio_seconds=QUICK["max_audio_seconds"],
                                                             min_audio_seconds=QUICK["max_audio_seconds"]))
    for system in report["systems"]:
        assert [lv["load"] for lv in system["closed_loop"]] == QUICK["concurrency"]
        single = system["closed_loop"][0]
        assert single["requests"] >= 1 and single["failed"] == 0
        # With one client, request i is corpus text i (the client cycles the corpus): every system
        # must deliver exactly its frames.
        for index, raw in enumerate(single["traces"]):
            trace = RequestTrace(raw["sent"], 24000, [tuple(c) for c in raw["chunks"]], raw["ok"])
            assert trace.ttfa is not None and trace.ttfa > 0
            assert round(trace.audio_seconds * 24000) == corpus[index % len(corpus)].max_tokens // FRAME_TOKENS * spf
