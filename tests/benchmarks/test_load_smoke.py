"""The load benchmark's corpus (its quick sweep end to end is tests/benchmarks/long/test_load_smoke.py's)."""
from __future__ import annotations

from benchmarks.corpus import CorpusConfig, build_corpus
from model.families.orpheus.layout import FRAME_TOKENS


def test_corpus_is_seeded_and_budgets_are_whole_frames():
    assert build_corpus(20) == build_corpus(20)
    assert build_corpus(20) != build_corpus(20, CorpusConfig(seed=1))
    cap = CorpusConfig(max_audio_seconds=2.0)
    assert all(r.max_tokens % FRAME_TOKENS == 0 and r.max_tokens <= 164 for r in build_corpus(50, cap))
