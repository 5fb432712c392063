"""Phoneme runs in text (`[[ ... ]]`): found in linear time, and never cut between segments."""
from __future__ import annotations

import time

from hypothesis import given
from hypothesis import strategies as st

from model.text.inline_phonemes import join_split_phoneme_runs, keep_phoneme_runs_whole, phoneme_runs, split_at_runs


def test_runs_are_the_closed_brackets_in_order():
    assert list(phoneme_runs("say [[ a b ]] and [[c]] but [[ not")) == [" a b ", "c"]
    assert list(phoneme_runs("no runs ]] here [[")) == []
    assert list(split_at_runs("x [[ a ]] y")) == [("x ", "[[ a ]]"), (" y", "")]


def test_unclosed_brackets_cost_linear_time():
    hostile = "[[" * 50_000  # 100,000 characters of runs that never close
    started = time.perf_counter()
    assert list(phoneme_runs(hostile)) == []
    assert time.perf_counter() - started < 0.1


@given(st.text(alphabet="ab []", max_size=60))
def test_splitting_at_runs_keeps_every_character_in_order(text):
    assert "".join(written + run for written, run in split_at_runs(text)) == text


def test_a_cut_inside_a_run_moves_before_it_or_after_it():
    assert keep_phoneme_runs_whole("say [[ h ə", "l oʊ ]] now") == ("say", "[[ h ə l oʊ ]] now")
    assert keep_phoneme_runs_whole("[[ h ə", "l oʊ ]] now") == ("[[ h ə l oʊ ]]", "now")
    assert keep_phoneme_runs_whole("say [[ a ]] and", "more") == ("say [[ a ]] and", "more")
    assert keep_phoneme_runs_whole("stray [[ never", "closed") == ("stray", "[[ never closed")


def test_pieces_cut_inside_a_run_are_joined_up_to_the_piece_that_closes_it():
    assert join_split_phoneme_runs(["One [[ a", "b", "c ]] two.", "Three."]) == ["One [[ a b c ]] two.", "Three."]
    # A "[[" that nothing closes is text: it joins nothing.
    assert join_split_phoneme_runs(["One [[ a", "two.", "Three."]) == ["One [[ a", "two.", "Three."]
