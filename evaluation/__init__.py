"""Evaluation texts that benchmarks, training and tests all read, shipped as package data:
`sentences.txt` is the intelligibility set (30 English sentences, one per line), never used for
training (training/joe/make_data.py keeps them out of the teacher data); `paragraphs.txt` holds
10 short paragraphs of ordinary prose (2-4 sentences each, none of them an eval sentence) that the
serving benchmark mixes in as longer requests; `entities.tsv` is the text normalization
development set (issue 31: 44 voice-agent sentences with prices, phone numbers, dates, times,
units, abbreviations, acronyms, addresses..., each `written<TAB>spoken`, the spoken form written
out by hand as a person says it, not by the normalizer, and cased and punctuated as the written
one so that a voice reads both with the same prosody), read by benchmarks/entity_wer.py;
`held_apart.txt` holds 1,000 sentences that the joe student and its decoder did not train on,
written out in words, for the intelligibility gate (benchmarks/intelligibility_gate.py).

How `held_apart.txt` was made, once, and fixed here (the corpus is built from the installed
packages' docstrings, so it is not rebuilt at run time; the shipped data set's corpus.jsonl is not
in the repository, so that this build equals it is assumed, not checked): the 120 sentences that
training/joe/dataset.py holds out of `training.joe.corpus.build_corpus(CorpusConfig(size=12_000,
seed=0), eval_sentences())` (every index i with i % 100 == 99), then the first 880 sentences of
the same corpus drawn with seed 1 that are not in the seed-0 one (the same mix of docstring prose
and generated numbers, dates, money, times), each passed through `model.text.normalize` so that
digits are words the ASR's transcript can be scored against, skipping any that still held a digit
(one: "rfc821"); built 2026-12-07 with the project's venv (Python 3.11, torch 2.13, numpy's,
fastapi's... docstrings as installed).

A package of its own, importing only the standard library, so that both `benchmarks` and
`training` may read it without either importing the other (tests/test_layering.py)."""
from __future__ import annotations

from pathlib import Path

EVAL_SENTENCES = Path(__file__).parent / "sentences.txt"
PARAGRAPHS = Path(__file__).parent / "paragraphs.txt"
ENTITY_SENTENCES = Path(__file__).parent / "entities.tsv"
HELD_APART_SENTENCES = Path(__file__).parent / "held_apart.txt"


def _lines(path: Path) -> list[str]:
    return [line.strip() for line in path.read_text().splitlines() if line.strip()]


def eval_sentences() -> list[str]:
    """The intelligibility set, in file order, blank lines dropped."""
    return _lines(EVAL_SENTENCES)


def paragraphs() -> list[str]:
    """The serving benchmark's paragraphs, one per line, in file order."""
    return _lines(PARAGRAPHS)


def entity_sentences(path: Path = ENTITY_SENTENCES) -> list[tuple[str, str]]:
    """The normalization development set as (written, spoken) pairs, in file order."""
    return [tuple(line.split("\t")) for line in _lines(path)]


def held_apart_sentences() -> list[str]:
    """The joe training corpus's held-apart sentences, written out, in file order."""
    return _lines(HELD_APART_SENTENCES)
