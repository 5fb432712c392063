"""Text arriving in pieces → segments: where they are cut, and that no word is lost or repeated
whatever the pieces."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api.speech.text_split import split_first
from api.speech.text_stream import TextStream

REPLY = ("Sure, I can help you with that. Your order shipped on Monday, and it should arrive by "
         "Thursday at the latest, unless the carrier runs into delays that we cannot foresee right now, "
         "in which case we will email you! Anything else?")


def feed(stream: TextStream, pieces: list[str]) -> list[str]:
    segments = [segment for piece in pieces for segment in stream.add(piece)]
    rest = stream.flush()
    return segments + ([rest] if rest else [])


def test_a_sentence_is_ready_once_the_space_after_it_arrives():
    stream = TextStream()
    assert stream.add("Sure, I can help") == []  # a short clause is not cut
    assert stream.add(" you with that.") == []  # "that." may yet be "that.com"
    assert stream.add(" Your") == ["Sure, I can help you with that."]
    assert stream.buffered == "Your"


def test_a_long_sentence_starts_at_a_clause_once_enough_words_are_in():
    stream = TextStream(max_words=30, clause_min_words=12)
    words = "Your order shipped on Monday, and it should arrive by Thursday at the latest, unless".split(" ")
    ready = [segment for word in words for segment in stream.add(word + " ")]
    assert ready == ["Your order shipped on Monday, and it should arrive by Thursday at the latest,"]


def test_a_run_on_without_any_boundary_is_cut_after_max_words():
    stream = TextStream(max_words=5, clause_min_words=3)
    assert stream.add("one two three four") == []
    assert stream.add(" five") == []  # "five" may be "fiver"
    assert stream.add(" six") == ["one two three four five"]


def test_flush_hands_out_the_rest_and_clear_drops_it():
    stream = TextStream()
    stream.add("Hello there")
    assert stream.flush() == "Hello there" and stream.flush() is None
    stream.add("Never mind")
    stream.clear()
    assert stream.flush() is None


def test_invalid_limits_are_refused():
    with pytest.raises(ValueError):
        TextStream(max_words=5, clause_min_words=6)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=len(REPLY) - 1), max_size=40, unique=True))
def test_any_pieces_give_every_word_once_in_segments_of_at_most_max_words(cuts):
    cuts = sorted(cuts)
    pieces = [REPLY[a:b] for a, b in zip([0, *cuts], [*cuts, len(REPLY)])]
    segments = feed(TextStream(max_words=30), pieces)
    assert " ".join(segments).split() == REPLY.split()
    assert all(len(segment.split()) <= 30 for segment in segments)
    assert segments[0] == "Sure, I can help you with that."  # the first sentence first, whole


@pytest.mark.parametrize("pieces, ready", [
    (["Stop.", "”", " Next"], ["Stop.”"]),  # a closing quote after the end mark, in a piece of its own
    (["Stop.”", "”", " Next"], ["Stop.””"]),
    (["a ", "\n", "b"], ["a"]),  # whitespace that goes on becomes a line break
    (["sure", ",", " I can ", "help"], ["sure,"]),  # a clause mark in a piece of its own
    (["Stop", ". ", "Next"], ["Stop."]),  # the end mark in a piece of its own
])
def test_a_boundary_split_across_pieces_is_found(pieces, ready):
    stream = TextStream(max_words=5, clause_min_words=1)
    assert [segment for piece in pieces for segment in stream.add(piece)] == ready


def test_dr_smith_streamed_word_by_word_is_not_cut_after_dr():
    stream = TextStream()
    ready = [segment for word in "Dr. Smith is here. Please".split(" ") for segment in stream.add(word + " ")]
    assert ready == ["Dr. Smith is here."]


@pytest.mark.parametrize("pieces, ready", [
    (["Meet me on Main St. ", "at noon. ", "Bye"], ["Meet me on Main St. at noon."]),
    (["Ask ", "D", "r", ".", " ", "Lee. ", "Bye"], ["Ask Dr. Lee."]),  # the abbreviation across pieces
    (["Bring snacks, e.g. ", "chips. ", "Bye"], ["Bring snacks, e.g. chips."]),
    (["I read J. R. R. ", "Tolkien. ", "Bye"], ["I read J. R. R. Tolkien."]),  # initials
    (["Call Dr.", "\n", "Smith"], ["Call Dr."]),  # a line break cuts regardless
    (["Call Dr. ", "\n", "Smith"], ["Call Dr."]),  # whitespace that goes on becomes a line break
    (["I saw Mr. ", "Dr. ", "Who. ", "Bye"], ["I saw Mr. Dr. Who."]),
    (["It was a dr. ", "Then"], ["It was a dr."]),  # not an abbreviation as written
])
def test_a_period_after_an_abbreviation_ends_no_sentence(pieces, ready):
    stream = TextStream(max_words=30, clause_min_words=12)
    assert [segment for piece in pieces for segment in stream.add(piece)] == ready


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=60), max_size=20, unique=True))
def test_the_stream_cuts_sentences_where_text_split_does(cuts):
    """One rule for both: the sentences the stream hands out are `split_first`'s, in turn."""
    text = "Dr. Smith met Mr. J. Doe on Elm St. at noon. It went well, e.g. the deal. No more. Bye now."
    cuts = sorted(cut for cut in cuts if cut < len(text))
    pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]
    expected, rest = [], text
    while rest:
        first, rest = split_first(rest, 30)
        expected.append(first)
    assert feed(TextStream(max_words=30), pieces) == expected


def test_the_open_word_is_the_word_that_may_go_on():
    stream = TextStream()
    stream.add("Hello wo")
    stream.add("r")
    assert stream.open_word == "wor"
    stream.add("ld ")
    assert stream.open_word == ""


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=list("ab .!?,;:\n\"')”"), max_size=400), st.lists(st.integers(0, 400), max_size=30),
       st.integers(1, 8), st.integers(1, 8))
def test_any_text_in_any_pieces_gives_every_word_once_in_segments_of_at_most_max_words(text, cuts, max_words, clause):
    cuts = sorted({cut for cut in cuts if cut <= len(text)})
    pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]
    segments = feed(TextStream(max_words, min(clause, max_words)), pieces)
    assert " ".join(segments).split() == text.split()
    assert all(0 < len(segment.split()) <= max_words for segment in segments)


class CountingStream(TextStream):
    """Counts the characters its scan takes in (each run of words or whitespace it looks at)."""

    scanned = 0

    def _word(self, word: str) -> None:
        self.scanned += len(word)
        super()._word(word)

    def _space(self, space: str):
        self.scanned += len(space)
        return super()._space(space)


QUARTER_MB_OF_WORDS = "word " * 52_440  # 256 KiB, 1,748 segments of 30 words


@pytest.mark.parametrize("shape, pieces", [
    ("words in one piece", [QUARTER_MB_OF_WORDS]),
    ("words, token by token", [word + " " for word in QUARTER_MB_OF_WORDS.split()]),
    ("no whitespace, a character at a time", ["x"] * 65_536),
    ("no boundary but whitespace", [" "] * 65_536),
    ("a clause mark after every word", ["word, " * 20_000]),
    ("sentences", ["Yes. " * 20_000]),
])
def test_the_scan_takes_in_each_character_a_bounded_number_of_times(shape, pieces):
    """Linear time, counted: whatever the text's shape, each character is scanned once, and
    again only after a clause cut (the scan looked up to max_words words ahead for a sentence
    end), so at most max_words / clause_min_words times in all (before, the whole buffer was
    scanned again after every cut and every add)."""
    stream = CountingStream(max_words=30, clause_min_words=12)
    for piece in pieces:
        stream.add(piece)
    total = sum(map(len, pieces))
    assert total <= stream.scanned <= 30 / 12 * total, shape


@pytest.mark.timeout(10)
def test_a_quarter_megabyte_of_words_is_cut_in_one_add():
    """A guard against a quadratic blowup, not a speed claim: before, this took over a minute."""
    stream = TextStream(max_words=30)
    segments = stream.add(QUARTER_MB_OF_WORDS)
    assert len(segments) == 1_748 and all(segment.split() == ["word"] * 30 for segment in segments)
    assert stream.flush() is None
