"""The core-speed benchmark's step split on tiny-random-qwen3 (one short round): the probe still
finds the family's parts, the shares add up, and the depth stage makes one batched call per code."""
from __future__ import annotations

import pytest

from benchmarks.core_speed import measure


def test_the_qwen3_step_split_adds_up_and_counts_one_predictor_call_per_code(chorus_cache):
    figures = measure("tiny-random-qwen3", threads=1, stream_counts=[3], rounds=1, max_tokens=4, fixed_length=True)
    assert figures["audio_s_per_s_3"] > 0
    assert figures["predictor_calls_per_step_min_3"] == figures["predictor_calls_per_step_max_3"] == 15
    assert figures["predictor_rows_per_call_3"] == pytest.approx(3.0)
    parts = ("forward", "emit", "codec", "rest")
    assert sum(figures[f"{part}_pct_3"] for part in parts) == pytest.approx(100.0, abs=0.5)
    # The emit's parts add up to it; the models' input embeddings are found and left out of the
    # share that is sampling and the engine's own work.
    emit_parts = ("predictor_forward", "predictor_inputs", "sampling", "emit_other")
    assert sum(figures[f"{part}_pct_3"] for part in emit_parts) == pytest.approx(figures["emit_pct_3"], abs=1e-6)
    assert figures["predictor_inputs_pct_3"] > 0 and figures["inputs_pct_3"] > 0
    assert figures["not_model_or_codec_pct_3"] == pytest.approx(
        figures["not_forward_or_codec_pct_3"] - figures["inputs_pct_3"] - figures["predictor_inputs_pct_3"])
