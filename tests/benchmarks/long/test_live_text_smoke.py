"""benchmarks/live_text.py runs end to end: on tiny-random-qwen3 a live turn is one engine
request whose first audio comes within two engine steps of its arrival; sentence by sentence
it takes one request per sentence."""
from __future__ import annotations

from benchmarks.live_text import gaps, measure


def test_live_text_benchmark_runs(chorus_cache):
    report = measure("tiny-random-qwen3", words_per_second=12.0, rounds=1)
    live, sentences = report["modes"]["live"], report["modes"]["sentences"]
    assert live["requests"] == 1 and live["steps_to_first_audio"] <= 2 and live["audio_s"] > 0
    assert sentences["requests"] == 2 and sentences["audio_s"] > 0


def test_gaps_are_where_the_listener_ran_out():
    # 0.1 s of audio at 0, more at 0.3 s (a 0.2 s gap), more at 0.35 s (still playing: none)
    arrivals = [(0.0, 100), (0.3, 100), (0.35, 100), (0.41, 5)]
    found = gaps(arrivals, sample_rate=1000)
    assert len(found) == 1 and abs(found[0] - 0.2) < 1e-9
