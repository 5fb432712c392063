"""Evaluation texts that benchmarks, training and tests all read, shipped as package data:
`sentences.txt` is the intelligibility set (30 English sentences, one per line), never used for
training (training/joe/make_data.py keeps them out of the teacher data); `paragraphs.txt` holds
10 short paragraphs of ordinary prose (2-4 sentences each, none of them an eval sentence) that the
serving benchmark mixes in as longer requests.

A package of its own, importing only the standard library, so that both `benchmarks` and
`training` may read it without either importing the other (tests/test_layering.py)."""
from __future__ import annotations

from pathlib import Path

EVAL_SENTENCES = Path(__file__).parent / "sentences.txt"
PARAGRAPHS = Path(__file__).parent / "paragraphs.txt"


def _lines(path: Path) -> list[str]:
    return [line.strip() for line in path.read_text().splitlines() if line.strip()]


def eval_sentences() -> list[str]:
    """The intelligibility set, in file order, blank lines dropped."""
    return _lines(EVAL_SENTENCES)


def paragraphs() -> list[str]:
    """The serving benchmark's paragraphs, one per line, in file order."""
    return _lines(PARAGRAPHS)
