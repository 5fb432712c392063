"""The intelligibility gate's arithmetic: the paired bootstrap interval of a WER difference, the
verdict on its upper bound, the set and the configurations (its run end to end is
tests/benchmarks/long/test_intelligibility_gate_smoke.py's)."""
from __future__ import annotations

import numpy as np
import pytest

from benchmarks.int8_layers import engine_chunks
from benchmarks.intelligibility_gate import GateConfig, Interval, gate_set, paired_bootstrap, passes
from evaluation import eval_sentences, held_apart_sentences


def test_identical_systems_differ_by_nothing():
    errors, words = np.array([0, 3, 1, 5]), np.array([10, 12, 8, 20])
    assert paired_bootstrap(errors, errors, words) == Interval(0.0, 0.0, 0.0)


def test_one_more_error_in_every_sentence_of_ten_words_is_ten_points_in_every_resample():
    words = np.full(50, 10)
    reference = np.random.default_rng(1).integers(0, 5, 50)
    interval = paired_bootstrap(reference, reference + 1, words)
    assert (interval.points, interval.low, interval.high) == pytest.approx((10.0, 10.0, 10.0))


def test_pairing_cancels_what_both_systems_share():
    # Hard sentences are hard for both: the systems' own WERs vary a lot over resamples, their
    # difference (a rare extra error) little. An unpaired interval would be far wider than 1 point.
    rng = np.random.default_rng(2)
    words = rng.integers(5, 30, 400)
    reference = rng.binomial(words, rng.uniform(0.0, 0.6, 400))
    other = reference + rng.binomial(1, 0.05, 400)
    interval = paired_bootstrap(reference, other, words)
    assert interval.low <= interval.points <= interval.high
    assert 0.0 < interval.low and interval.width < 0.6


def test_the_interval_narrows_as_the_set_grows():
    rng = np.random.default_rng(3)

    def width(n: int) -> float:
        words = rng.integers(5, 30, n)
        reference = rng.binomial(words, 0.15)
        other = reference + rng.binomial(words, 0.02) - rng.binomial(words, 0.01)
        return paired_bootstrap(reference, other, words).width

    # Sixteen times the sentences: about a quarter of the width.
    assert width(1600) < 0.4 * width(100)


def test_mismatched_counts_are_refused():
    with pytest.raises(ValueError):
        paired_bootstrap(np.array([1, 2]), np.array([1, 2, 3]), np.array([5, 5]))
    with pytest.raises(ValueError):
        paired_bootstrap(np.array([0]), np.array([0]), np.array([0]))


def test_the_verdict_is_the_upper_bound_not_the_point():
    assert passes(Interval(0.4, -0.1, 0.9))
    assert not passes(Interval(0.4, -0.5, 1.3))  # the point is under 1, the interval is not
    assert not passes(Interval(1.2, 1.1, 1.3))


def test_configurations_name_a_codec_and_a_precision():
    assert GateConfig.parse("istft-int8:bfloat16") == GateConfig("istft-int8", "bfloat16")
    assert GateConfig.parse("istft-onnxruntime").precision == "auto"
    with pytest.raises(ValueError, match="precision"):
        GateConfig.parse("istft:float16")


def test_the_set_is_the_eval_sentences_the_entities_written_out_and_the_held_apart_ones():
    entries = gate_set()
    parts = [p for p, _ in entries]
    assert list(dict.fromkeys(parts)) == ["eval", "entities written out", "held apart"]
    assert parts.count("held apart") == 1000 and len(entries) == 1074
    # Held apart means held apart: none is an eval sentence, and every one is written out in words.
    assert not set(held_apart_sentences()) & set(eval_sentences())
    assert not any(ch.isdigit() for s in held_apart_sentences() for ch in s)


def test_the_decoder_is_timed_in_the_engines_chunks():
    assert engine_chunks(300) == [8, 8, 16, 32, 64, 128, 44]
    assert engine_chunks(5) == [5]
