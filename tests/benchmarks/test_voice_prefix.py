"""benchmarks/voice_prefix.py runs and its figures hang together (a 6 s clip: more reference frames
than the tiny tokenizer's transcript tokens, so the target text meets the frames; one round)."""
from __future__ import annotations

from benchmarks.voice_prefix import measure


def test_the_voice_prefix_benchmark_reports_what_the_cache_shares(chorus_cache):
    figures = measure("tiny-random-qwen3-base", clip_seconds=6.0, rounds=1)
    positions = figures["first_prompt_positions"]
    assert figures["first_prefill_tokens"] == positions  # an empty cache
    # The same voice shares its head and transcript's whole blocks; the same text all but the last block.
    assert figures["repeat_prefill_tokens"] < figures["second_prefill_tokens"] < positions
    assert figures["repeat_prefill_tokens"] <= 16
    assert figures["x_vector_prefill_tokens"] == figures["x_vector_prompt_positions"]
