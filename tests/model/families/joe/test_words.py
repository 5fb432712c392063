"""Word spans from joe's prompt processing: every written word that is spoken, in order, on the
frames its phonemes were given, whatever espeak did to the word boundaries."""
from __future__ import annotations

import numpy as np
import pytest

from tests.voice_packages import require_voice_packages

require_voice_packages()

from model.families.joe.frontend import TeacherFrontend  # noqa: E402
from model.families.joe.teacher import HOP_SAMPLES  # noqa: E402
from model.families.joe.words import spoken_words  # noqa: E402
from model.text import normalize  # noqa: E402


@pytest.fixture(scope="module")
def frontend(chorus_cache) -> TeacherFrontend:
    return TeacherFrontend()


def frame_seconds(frontend) -> float:
    return HOP_SAMPLES / frontend.sample_rate


def check_in_order_within(prompt, seconds: float) -> None:
    for word in prompt.words:
        assert 0 <= word.start < word.end <= seconds + 1e-9, word
    for before, after in zip(prompt.words, prompt.words[1:]):
        assert before.end <= after.start + 1e-9, (before, after)


def test_words_joined_by_espeak_get_their_own_spans(frontend):
    # espeak speaks "in the" as one word (ɪnðə) and "from the" as fɹʌmðə.
    text = "We are open from nine in the morning."
    prompt = frontend.speech_prompt(text)
    assert [w.word for w in prompt.words] == text.split()
    check_in_order_within(prompt, prompt.num_frames * frame_seconds(frontend))
    spans = {w.word: w for w in prompt.words}
    assert spans["in"].end == pytest.approx(spans["the"].start)  # one espeak word, cut inside


def test_numbers_abbreviations_and_symbols(frontend):
    text = "Dr. Smith paid 123 dollars — at 5:30 pm!"
    prompt = frontend.speech_prompt(text)
    # The dash is not spoken: it has no span. Everything else is, as written.
    assert [w.word for w in prompt.words] == ["Dr.", "Smith", "paid", "123", "dollars", "at", "5:30", "pm!"]
    check_in_order_within(prompt, prompt.num_frames * frame_seconds(frontend))
    spans = {w.word: w for w in prompt.words}
    # "one hundred twenty three" takes far longer than "paid".
    assert spans["123"].end - spans["123"].start > 2 * (spans["paid"].end - spans["paid"].start)


def test_spans_are_the_durations_of_the_words_phonemes(frontend):
    text = "Hello there, friend."
    prompt = frontend.speech_prompt(text)
    durations = frontend.run(text).durations
    starts = np.concatenate([[0], np.cumsum(durations)]) * frame_seconds(frontend)
    # Each span starts and ends on a phoneme boundary of the prompt: exact to a frame.
    for word in prompt.words:
        assert np.isclose(starts, word.start).any() and np.isclose(starts, word.end).any()
    # The comma's pause lies between "there," and "friend.", in neither.
    there, friend = prompt.words[1], prompt.words[2]
    assert friend.start - there.end > 0.1


def test_faster_speech_has_earlier_words(frontend):
    text = "Please hold the line while I check your account."
    normal, fast = frontend.speech_prompt(text), frontend.speech_prompt(text, speed=2.0)
    assert [w.word for w in fast.words] == [w.word for w in normal.words]
    ratio = fast.words[-1].end / normal.words[-1].end
    assert ratio == pytest.approx(fast.num_frames / normal.num_frames, abs=0.05)
    assert 0.45 < ratio < 0.6


def test_durations_that_do_not_fit_the_phonemes_are_refused(frontend):
    text = "Hello there."
    sentences = frontend.phonemizer.sentences(text)
    durations = frontend.run(text).durations
    with pytest.raises(ValueError, match="durations"):
        spoken_words(normalize(text), sentences, durations[:-1], frontend.phonemizer.config.phoneme_id_map,
                     frontend.phonemizer.word_phonemes, frame_seconds(frontend))


def test_an_entity_is_one_written_word_spanning_all_it_says(frontend):
    text = "It costs $3.50 today."
    prompt = frontend.speech_prompt(text)
    assert [w.word for w in prompt.words] == ["It", "costs", "$3.50", "today."]
    check_in_order_within(prompt, prompt.num_frames * frame_seconds(frontend))
    spans = {w.word: w.end - w.start for w in prompt.words}
    # "three dollars and fifty cents" against "It".
    assert spans["$3.50"] > 3 * spans["It"]
    # The prompt says the amount: the phonemes are those of its spoken form.
    assert prompt.token_ids == frontend.run("It costs three dollars and fifty cents today.").phoneme_ids.tolist()


def test_text_without_entities_is_phonemized_as_written(frontend):
    text = "Please hold while I transfer your call to the billing department."
    assert frontend.speech_prompt(text).token_ids == frontend.run(text).phoneme_ids.tolist()


def test_normalization_can_be_turned_off_to_measure_it(frontend):
    """benchmarks/entity_wer.py's raw input: with `normalizes` off the text is phonemized as written."""
    text = "It costs $3.50 today."
    normalized = frontend.speech_prompt(text).token_ids
    frontend.normalizes = False
    try:
        raw = frontend.speech_prompt(text).token_ids
    finally:
        frontend.normalizes = True
    assert raw == frontend.run(text).phoneme_ids.tolist() and raw != normalized
