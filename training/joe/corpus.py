"""The teacher's text: real English from docstrings shipped with Python and installed packages,
plus generated sentences (numbers, dates, money, times, questions, short replies), seeded,
deduplicated, and disjoint from the evaluation sentences."""
from __future__ import annotations

import ast
import importlib.util
import random
import re
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from training.joe.phrases import GENERATORS

DOCS = "docs"
CATEGORIES = (DOCS, *GENERATORS)
# Packages whose docstrings are mostly prose; the ones not installed are skipped.
DOC_PACKAGES = ("numpy", "torch", "fastapi", "starlette", "pydantic", "hypothesis", "jinja2")
# A shared run of this many words with an evaluation sentence excludes a candidate.
EVAL_OVERLAP_WORDS = 5

_SKIPPED_DIRS = {"test", "tests", "testing", "_vendor", "vendored", "idlelib", "site-packages"}
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
# Letters, digits, and the punctuation espeak reads as pauses; a dot only at the end.
_SPEAKABLE = re.compile(r"[A-Z][A-Za-z0-9 ,;'\-]*[A-Za-z0-9][.?!]")
_PLAIN_WORD = re.compile(r"[a-z]+")
_MARKUP_LINE = re.compile(r"^\s*(>>>|\.\.|:|-|\*|\||\+|=|#|\d+\.)|\s:\s|::|---|===")
_MAX_WORD_CHARS = 16


@dataclass(slots=True)
class CorpusSentence:
    text: str
    category: str


@dataclass(slots=True)
class CorpusConfig:
    """How many sentences, from where, in which mix. Invariant: the same config and the same
    installed files give the same sentences in the same order."""

    size: int = 10_000
    seed: int = 0
    generated_fraction: float = 0.3
    min_words: int = 4
    max_words: int = 30
    source_roots: tuple[Path, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if self.size < 1:
            raise ValueError("size must be >= 1")
        if not 0.0 <= self.generated_fraction <= 1.0:
            raise ValueError("generated_fraction must lie in [0, 1]")
        if not 1 <= self.min_words <= self.max_words:
            raise ValueError("need 1 <= min_words <= max_words")
        self.source_roots = tuple(Path(p) for p in self.source_roots) or default_source_roots()


def default_source_roots() -> tuple[Path, ...]:
    roots = [Path(sysconfig.get_paths()["stdlib"])]
    for name in DOC_PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            roots.append(Path(next(iter(spec.submodule_search_locations))))
    return tuple(roots)


def normalize(text: str) -> str:
    """Lowercase words only: the identity used for deduplication and exclusion."""
    return " ".join(re.findall(r"[a-z0-9']+", text.lower()))


def build_corpus(config: CorpusConfig, excluded: Sequence[str]) -> list[CorpusSentence]:
    rng = random.Random(config.seed)
    blocked = _Exclusion(excluded)
    seen: set[str] = set()

    def admit(text: str) -> bool:
        key = normalize(text)
        if key in seen or blocked.matches(key):
            return False
        seen.add(key)
        return True

    generated_total = round(config.size * config.generated_fraction)
    per_category = [generated_total // len(GENERATORS)] * len(GENERATORS)
    for index in range(generated_total % len(GENERATORS)):
        per_category[index] += 1
    sentences = [
        CorpusSentence(text, category)
        for (category, generate), count in zip(GENERATORS.items(), per_category)
        for text in _unique_draws(lambda: generate(rng), count, admit, category)
    ]
    pool = [s for s in doc_sentences(config) if admit(s)]
    wanted = config.size - generated_total
    if len(pool) < wanted:
        raise ValueError(f"only {len(pool)} documentation sentences found, {wanted} wanted")
    sentences += [CorpusSentence(text, DOCS) for text in rng.sample(pool, wanted)]
    rng.shuffle(sentences)
    return sentences


def doc_sentences(config: CorpusConfig) -> Iterator[str]:
    for path in _python_files(config.source_roots):
        for docstring in _docstrings(path):
            for paragraph in _prose_paragraphs(docstring):
                for sentence in _SENTENCE_BREAK.split(paragraph):
                    if _speakable(sentence, config.min_words, config.max_words):
                        yield sentence


def read_sentences(path: Path) -> list[str]:
    return [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


class _Exclusion:
    """Matches a normalized candidate equal to, or sharing a run of EVAL_OVERLAP_WORDS words
    with, any excluded sentence."""

    def __init__(self, excluded: Iterable[str]) -> None:
        keys = [normalize(text) for text in excluded]
        self.exact = set(keys)
        self.runs = {run for key in keys for run in _runs(key.split())}

    def matches(self, key: str) -> bool:
        return key in self.exact or any(run in self.runs for run in _runs(key.split()))


def _runs(words: list[str]) -> Iterator[tuple[str, ...]]:
    for start in range(len(words) - EVAL_OVERLAP_WORDS + 1):
        yield tuple(words[start : start + EVAL_OVERLAP_WORDS])


def _unique_draws(draw, count: int, admit, category: str) -> list[str]:
    texts: list[str] = []
    for _ in range(count * 50):
        if len(texts) == count:
            break
        text = draw()
        if admit(text):
            texts.append(text)
    if len(texts) < count:
        raise ValueError(f"category {category!r} ran out of distinct sentences at {len(texts)}")
    return texts


def _python_files(roots: Sequence[Path]) -> Iterator[Path]:
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            if not _SKIPPED_DIRS.intersection(path.relative_to(root).parts[:-1]):
                yield path


def _docstrings(path: Path) -> Iterator[str]:
    try:
        tree = ast.parse(path.read_bytes())
    except (SyntaxError, ValueError):
        return
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            docstring = ast.get_docstring(node)
            if docstring:
                yield docstring


def _prose_paragraphs(docstring: str) -> Iterator[str]:
    for block in re.split(r"\n\s*\n", docstring):
        lines = block.splitlines()
        if lines and not any(_MARKUP_LINE.search(line) for line in lines):
            yield " ".join(line.strip() for line in lines)


def _speakable(sentence: str, min_words: int, max_words: int) -> bool:
    if not _SPEAKABLE.fullmatch(sentence):
        return False
    words = sentence[:-1].replace(",", " ").replace(";", " ").split()
    if not min_words <= len(words) <= max_words:
        return False
    if any(len(word) > _MAX_WORD_CHARS or not word[1:].islower() and word[1:] for word in words):
        return False
    plain = sum(bool(_PLAIN_WORD.fullmatch(word)) for word in words)
    return plain >= 0.75 * len(words)
