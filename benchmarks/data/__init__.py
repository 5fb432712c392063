"""Data the benchmarks and tests read, kept in the repository: `sentences.txt` is the
intelligibility set (30 English sentences, one per line), never used for training."""
from __future__ import annotations

from pathlib import Path

EVAL_SENTENCES = Path(__file__).parent / "sentences.txt"


def eval_sentences() -> list[str]:
    """The intelligibility set, in file order, blank lines dropped."""
    return [line.strip() for line in EVAL_SENTENCES.read_text().splitlines() if line.strip()]
