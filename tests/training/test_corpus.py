from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from evaluation import EVAL_SENTENCES
from training.joe.corpus import (
    CATEGORIES,
    DOCS,
    EVAL_OVERLAP_WORDS,
    CorpusConfig,
    build_corpus,
    doc_sentences,
    normalize,
    read_sentences,
)

PROSE = [
    "Return the number of items waiting in the queue.",
    "This class keeps track of every open file handle.",
    "Close the connection when the server stops responding.",
    "The default value is used when no other value is given.",
    "Split the path into a head and a tail.",
    "A warning is raised if the buffer grows too large.",
    "Each worker reads one line at a time from the pipe.",
    "Only the first match is replaced, unless told otherwise.",
]
SOURCE = f'''
"""{" ".join(PROSE[:4])}

Parameters
----------
x : int
    The value.
"""


def helper():
    """{" ".join(PROSE[4:])} Use ``os.path.join(a, b)`` to build it.

    >>> helper()
    """
'''


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("docs")
    (folder / "sample.py").write_text(SOURCE)
    return folder


def config(root: Path, **overrides) -> CorpusConfig:
    return CorpusConfig(**{"size": 20, "generated_fraction": 0.6, "source_roots": (root,), **overrides})


def test_docstrings_are_cleaned_to_prose(root):
    assert list(doc_sentences(config(root))) == PROSE


def test_mix_and_category_coverage(root):
    corpus = build_corpus(config(root), [])
    counts = Counter(s.category for s in corpus)
    assert set(counts) == set(CATEGORIES) and counts[DOCS] == 8
    assert all(counts[c] == 2 for c in CATEGORIES if c != DOCS)
    assert len({normalize(s.text) for s in corpus}) == len(corpus)


def test_seeded(root):
    assert build_corpus(config(root), []) == build_corpus(config(root), [])
    assert build_corpus(config(root), []) != build_corpus(config(root, seed=1), [])


def test_excluded_sentences_never_appear(root):
    plain = build_corpus(config(root, size=200, generated_fraction=1.0), [])
    excluded = [s.text for s in plain[:50]] + [PROSE[0]]
    corpus = build_corpus(config(root, size=207, generated_fraction=200 / 207), excluded)
    runs = {tuple(normalize(t).split()[i:i + EVAL_OVERLAP_WORDS]) for t in excluded
            for i in range(len(normalize(t).split()) - EVAL_OVERLAP_WORDS + 1)}
    for sentence in corpus:
        words = normalize(sentence.text).split()
        assert normalize(sentence.text) not in {normalize(t) for t in excluded}
        assert not any(tuple(words[i:i + EVAL_OVERLAP_WORDS]) in runs
                       for i in range(len(words) - EVAL_OVERLAP_WORDS + 1))


def test_evaluation_sentences_excluded(root):
    evaluation = read_sentences(EVAL_SENTENCES)
    corpus = build_corpus(config(root, size=600, generated_fraction=592 / 600), evaluation)
    assert not {normalize(s.text) for s in corpus} & {normalize(t) for t in evaluation}


def test_too_few_documentation_sentences(root):
    with pytest.raises(ValueError, match="documentation sentences"):
        build_corpus(config(root, generated_fraction=0.0), [])
