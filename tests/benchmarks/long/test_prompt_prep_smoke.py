"""`python -m benchmarks.prompt_prep` on this tree: a positive time per round of the 30 sentences."""
from __future__ import annotations

from benchmarks.prompt_prep import main
from tests.voice_packages import require_voice_packages

require_voice_packages()


def test_one_round_of_the_evaluation_sentences_is_timed():
    result = main(["--model", "joe", "--rounds", "1"])
    assert result["model"] == "joe" and result["rounds"] == 1
    assert 0 < result["round_seconds"] < 60
