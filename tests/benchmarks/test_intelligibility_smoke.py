"""The intelligibility benchmark's word error arithmetic (its quick run end to end is
tests/benchmarks/long/test_intelligibility_smoke.py's)."""
from __future__ import annotations

import pytest

from benchmarks.asr import WordErrors, edit_distance, normalize_words


def test_word_errors_count_edits_over_reference_words():
    assert normalize_words("It's 3:30, Mr. O'Neil - well-known!") == ["it's", "mr", "o'neil", "well", "known"]
    assert edit_distance("a b c d".split(), "a x c".split()) == 2  # one substitution, one deletion
    errors = WordErrors()
    errors.add("the cat sat", "the cat sat")
    errors.add("on the mat", "on a mat today")
    assert (errors.errors, errors.words) == (2, 6)
    assert errors.rate == pytest.approx(1 / 3)
