"""Cutting a speech's text by text alone: the first sentence first, whole sentences in growing
segments after it, and the cut of a segment too long for one request."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api.speech.text_split import IDEOGRAPH, SENTENCE, WORD, UncuttableText, check_runs, cut_near, cut_to_size, plan_texts

WORDS = st.text(alphabet="abcdefghij", min_size=1, max_size=12)
# Sentences and clauses of up to 40 words, so that first sentences over 30 words occur.
SENTENCES = st.lists(
    st.tuples(st.lists(WORDS, min_size=1, max_size=40), st.sampled_from([".", "!", "?", ",", ";", ""])),
    min_size=1, max_size=12,
)


def join(sentences) -> str:
    return " ".join(" ".join(words) + end for words, end in sentences)


def first_sentence_words(sentences) -> list[str]:
    words: list[str] = []
    for piece, end in sentences:
        words += [*piece[:-1], piece[-1] + end]
        if end in (".", "!", "?"):
            break
    return words


def sentence_count(segment: str) -> int:
    return len(SENTENCE.findall(segment)) + 1


def sentence_texts(sentences) -> list[str]:
    """The sentences of `join(sentences)` as the splitter sees them (clauses run on)."""
    texts, current = [], []
    for words, end in sentences:
        current.append(" ".join(words) + end)
        if end in (".", "!", "?"):
            texts.append(" ".join(current))
            current = []
    return texts + ([" ".join(current)] if current else [])


# max_chars from 13: no word (up to 12 letters and a mark) is longer, so none is cut inside.
@settings(max_examples=200, deadline=None)
@given(SENTENCES, st.integers(min_value=1, max_value=40), st.integers(min_value=13, max_value=400),
       st.one_of(st.none(), st.integers(min_value=1, max_value=60)))
def test_segments_hold_every_word_once_in_order_first_sentence_first(sentences, first_words, max_chars, max_words):
    text = join(sentences)
    segments = plan_texts(text, first_words, max_chars, max_words)
    assert " ".join(segments).split() == text.split()  # nothing lost, repeated or reordered
    assert all(segment == segment.strip() and segment for segment in segments)
    assert all(len(segment) <= max_chars for segment in segments)  # bounded, whatever the text
    assert all(len(segment.split()) <= (max_words or len(text)) for segment in segments)
    if all(len(s) <= max_chars and len(s.split()) <= (max_words or len(s)) for s in sentence_texts(sentences)):
        first, sentence = segments[0].split(), first_sentence_words(sentences)
        if len(sentence) <= first_words:
            assert first == sentence
        else:  # a long first sentence: its first clause, or its first first_words words
            assert first == sentence[:len(first)]
            assert first[-1][-1] in ",;" if len(first) < first_words else len(first) == first_words
        for k, segment in enumerate(segments[1:], start=1):
            if k + 1 < len(segments):
                assert segment[-1] in ".!?"  # later segments are whole sentences
            if sentence_count(segment) > 1:  # growth: no more than came before, up to max_chars
                assert len(segment) <= min(max_chars, len(" ".join(segments[:k])))


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet="ab1 ,.\n", max_size=600), st.integers(min_value=1, max_value=80),
       st.integers(min_value=1, max_value=30))
def test_cut_to_size_bounds_every_piece_and_keeps_every_character(text, max_chars, max_words):
    pieces = cut_to_size(text, max_chars, max_words)
    assert all(0 < len(piece) <= max_chars and len(piece.split()) <= max_words for piece in pieces)
    assert "".join("".join(pieces).split()) == "".join(text.split())  # only whitespace is dropped


def test_a_long_sentence_without_ends_is_cut_by_words_and_characters():
    text = "1 " * 2048
    segments = plan_texts(text, 30, 1000, max_words=150)
    assert [len(s.split()) for s in segments] == [30, *[150] * 13, 68]
    assert plan_texts("a" * 2500, 30, 1000) == ["a" * 1000, "a" * 1000, "a" * 500]


def test_sentences_within_the_bounds_keep_their_own_whitespace():
    text = "First one. Two  spaces,\tand a tab. Four."
    assert plan_texts(text, 30, 1000, max_words=150) == ["First one.", "Two  spaces,\tand a tab.", "Four."]


def test_a_run_too_long_to_cut_is_refused():
    check_runs("word " * 1000, 12)
    with pytest.raises(UncuttableText, match="run of 13 characters"):
        check_runs("fine " + "x" * 13, 12)


def test_first_sentence_first_then_segments_that_grow():
    text = "Hello there. " + " ".join(f"Sentence number {i} is here." for i in range(12))
    segments = plan_texts(text, 30, 1000)
    assert segments[:3] == ["Hello there.", "Sentence number 0 is here.", "Sentence number 1 is here."]
    assert [sentence_count(s) for s in segments] == [1, 1, 1, 2, 4, 4]
    assert [sentence_count(s) for s in plan_texts(text, 30, 60)] == [1, 1, 1, 2, 2, 2, 2, 2]


def test_a_long_first_sentence_is_cut_at_its_first_clause_or_after_30_words():
    words = [f"w{i}" for i in range(40)]
    clause = " ".join(words[:12]) + ", " + " ".join(words[12:]) + ". Next one."
    assert plan_texts(clause, 30, 1000)[:2] == [" ".join(words[:12]) + ",", " ".join(words[12:]) + "."]
    late_clause = " ".join(words[:35]) + "; " + " ".join(words[35:]) + "."
    assert plan_texts(late_clause, 30, 1000)[0] == " ".join(words[:30])
    assert plan_texts(" ".join(words), 30, 1000) == [" ".join(words[:30]), " ".join(words[30:])]
    short = " ".join(words[:30]) + ", and more."  # 32 words, but the clause holds 30
    assert plan_texts(short, 30, 1000)[0] == " ".join(words[:30]) + ","


@settings(max_examples=200, deadline=None)
@given(SENTENCES, st.integers(min_value=1, max_value=200))
def test_cut_near_keeps_every_word_at_the_coarsest_boundary_within_the_length(sentences, max_chars):
    text = join(sentences)
    if len(text) < 2:
        return
    head, tail = cut_near(text, max_chars)
    assert head and tail
    assert len(head) <= max(1, max_chars)
    assert "".join((head + tail).split()) == "".join(text.split())
    if len(text.split()[0]) + 1 <= min(max_chars, len(text) - 1):  # a word boundary is within reach
        assert f"{head} {tail}".split() == text.split()
    if any(0 < m.end() <= max_chars and m.end() < len(text) for m in SENTENCE.finditer(text)):
        assert head[-1] in ".!?"


def test_cut_near_prefers_sentences_then_clauses_then_words():
    assert cut_near("One two. Three four, five six seven.", 25) == ("One two.", "Three four, five six seven.")
    assert cut_near("Three four, five six seven.", 15) == ("Three four,", "five six seven.")
    assert cut_near("Three four five", 12) == ("Three four", "five")
    assert cut_near("abcdefgh", 3) == ("abc", "defgh")


@pytest.mark.parametrize("text, first", [
    ("Dr. Smith lives on Elm St. near Mr. and Mrs. Lee. Then we go.",
     "Dr. Smith lives on Elm St. near Mr. and Mrs. Lee."),
    ("Ms. Ray vs. Acme Inc. on No. 5, e.g. that, i.e. this, etc. Done. Next.",
     "Ms. Ray vs. Acme Inc. on No. 5, e.g. that, i.e. this, etc. Done."),
    ("J. R. R. Tolkien wrote it. Next.", "J. R. R. Tolkien wrote it."),
    ("See Dr.\nSmith", "See Dr."),  # a line break cuts regardless
    ("The answer was yes. Then more.", "The answer was yes."),
])
def test_abbreviations_and_initials_end_no_sentence(text, first):
    assert plan_texts(text, 30, 1000)[0] == first
    assert cut_near(text, len(first) + 3)[0] == first


CHINESE = "你好，今天天气很好。我们说话吧！这是一个很长的句子，用来测试中文的切分方式。"


def test_chinese_and_japanese_break_after_their_punctuation_and_between_characters():
    # No spaces anywhere: sentences end at 。！？, clauses at ，, and each ideograph is a word.
    segments = plan_texts(CHINESE + "日本語のテキストです。", 4, 40)
    assert segments[0] == "你好，"  # the first sentence has 8 words: its first clause goes first
    assert "".join(segments) == CHINESE + "日本語のテキストです。"
    assert all(segment.endswith(("。", "！")) for segment in segments[1:])
    pieces = cut_to_size(CHINESE, max_chars=100, max_words=6)
    assert "".join(pieces) == CHINESE
    assert all(len(IDEOGRAPH.findall(piece)) <= 6 for piece in pieces)  # a word each
    assert cut_near(CHINESE, 12) == ("你好，今天天气很好。", "我们说话吧！这是一个很长的句子，用来测试中文的切分方式。")


def test_a_long_paragraph_of_ideographs_is_not_a_run():
    check_runs("好" * 5000, 256)  # each character is a place to cut
    with pytest.raises(UncuttableText):
        check_runs("好" + "a" * 300, 256)


# Any text at all: Latin, ideographs and kana next to other letters, punctuation of both kinds.
MIXED_SCRIPT = st.text(alphabet=st.sampled_from("ab é1 ,.。，！\n好語のテ"), max_size=300)


@settings(max_examples=300, deadline=None)
@given(MIXED_SCRIPT, st.integers(min_value=1, max_value=40), st.integers(min_value=1, max_value=120),
       st.one_of(st.none(), st.integers(min_value=1, max_value=30)))
def test_mixed_scripts_are_planned_whole_within_the_bounds(text, first_words, max_chars, max_words):
    segments = plan_texts(text, first_words, max_chars, max_words)
    assert "".join("".join(segments).split()) == "".join(text.split())  # only whitespace is dropped
    assert all(segment and len(segment) <= max_chars for segment in segments)
    if max_words is not None:
        assert all(len(WORD.split(segment)) <= max_words for segment in segments)
