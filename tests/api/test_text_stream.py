"""Text arriving in pieces → segments: where they are cut, and that no word is lost or repeated
whatever the pieces."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api.text_stream import TextStream

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
