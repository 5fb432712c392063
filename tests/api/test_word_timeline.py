"""Words placed on a speech's joined audio and told as that audio leaves."""
from __future__ import annotations

import pytest

from api.speech.word_timeline import WordTimeline, word_events
from model.families.base import SpokenWord

RATE = 1000


def test_segments_are_placed_where_their_audio_begins_and_told_once_in_order():
    timeline = WordTimeline(RATE)
    timeline.add_segment(0, (SpokenWord("one", 0.1, 0.3), SpokenWord("two", 0.4, 0.6)))
    assert timeline.reached(0.1) == []  # "one" starts at sample 100: not within the first 100
    assert [w.word for w in timeline.reached(0.101)] == ["one"]
    timeline.add_segment(700, (SpokenWord("three", 0.05, 0.2),))
    told = [(w.word, w.start, w.end) for w in timeline.reached(10.0)]
    assert told == [("two", 0.4, 0.6), ("three", 0.75, pytest.approx(0.9))]
    assert timeline.reached(10.0) == [] and timeline.remaining() == []


def test_remaining_words_are_told_at_the_end():
    timeline = WordTimeline(RATE)
    timeline.add_segment(0, (SpokenWord("a", 0.0, 0.1), SpokenWord("b", 0.5, 0.7)))
    assert [w.word for w in timeline.reached(0.001)] == ["a"]
    assert [w.word for w in timeline.remaining()] == ["b"]
    assert timeline.remaining() == []


def test_events_are_in_the_clients_time():
    words = [SpokenWord("hi", 1.0, 1.5)]
    # Played twice as fast, after 3 s of earlier audio on the same stream.
    assert word_events(words, stretch=2.0, offset=3.0) == [{"word": "hi", "start": 3.5, "end": 3.75}]
