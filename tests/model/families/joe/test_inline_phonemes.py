"""Phonemes written inline in joe's text, Piper's way (`[[ təmˈeɪɾoʊ ]]`): said as written, in
the sentence they stand in, refused when the voice has no ids for a symbol, a word of their own
in the timestamps; text without them is read exactly as before."""
from __future__ import annotations

import numpy as np
import pytest

from tests.voice_packages import require_voice_packages

require_voice_packages()

from piper.phoneme_ids import phonemes_to_ids  # noqa: E402

from evaluation import eval_sentences  # noqa: E402
from model.families.base import PhonemesRefused, PromptTooLong  # noqa: E402
from model.families.joe.frontend import MAX_RUN_PHONEME_IDS, TeacherFrontend  # noqa: E402
from model.families.joe.teacher import HOP_SAMPLES, TeacherOutput, TeacherScales  # noqa: E402
from model.text import normalize  # noqa: E402

TOMATO = "təmˈeɪɾoʊ"  # espeak's, for "tomato"


@pytest.fixture(scope="module")
def frontend(chorus_cache) -> TeacherFrontend:
    return TeacherFrontend()


@pytest.fixture(scope="module")
def prompt_frontend(chorus_cache):
    from model.families.joe.prompt import JoePromptFrontend
    from model.families.joe.student import StudentConfig

    return JoePromptFrontend(StudentConfig(frames_per_step=4))


def espeak(frontend, text: str) -> list[str]:
    """`text`'s phonemes, when espeak makes one sentence of it."""
    [phonemes] = frontend.phonemizer.sentences(text)
    return phonemes


def ids_of(frontend, *sentences: list[str]) -> list[int]:
    return [i for phonemes in sentences for i in frontend.phonemizer.ids(phonemes)]


def test_espeaks_phonemes_as_a_run_are_the_word_itself(frontend):
    assert "".join(espeak(frontend, "tomato")) == TOMATO
    run, text = frontend.speech_prompt(f"[[ {TOMATO} ]]"), frontend.speech_prompt("tomato")
    # The map's ids, symbol by symbol, framed as Piper frames a sentence.
    assert run.token_ids == phonemes_to_ids(list(TOMATO), frontend.phonemizer.config.phoneme_id_map)
    assert run.token_ids == text.token_ids and run.num_frames == text.num_frames
    assert np.array_equal(run.conditioning.numpy(), text.conditioning.numpy())


def test_a_run_within_a_sentence(frontend):
    prompt = frontend.speech_prompt(f"Say [[ {TOMATO} ]] now.")
    expected = espeak(frontend, "Say") + [" ", *TOMATO, " "] + espeak(frontend, "now.")
    assert prompt.token_ids == ids_of(frontend, expected)
    assert prompt.token_ids == frontend.speech_prompt("Say tomato now.").token_ids


def test_a_run_starts_the_text(frontend):
    prompt = frontend.speech_prompt("[[ həlˈoʊ ]] there. Bye.")
    expected = [*"həlˈoʊ", " ", *espeak(frontend, "there.")], espeak(frontend, "Bye.")
    assert prompt.token_ids == ids_of(frontend, *expected)


def test_a_run_ends_the_text(frontend):
    # It ends the sentence it is written in...
    assert frontend.speech_prompt("Say [[ bˈaɪ ]]").token_ids == ids_of(frontend, espeak(frontend, "Say") + [" ", *"bˈaɪ"])
    # ...and after a full stop it is a sentence of its own, as the word "Bye" would be.
    prompt = frontend.speech_prompt("Hello. [[ bˈaɪ ]]")
    assert prompt.token_ids == ids_of(frontend, espeak(frontend, "Hello."), list("bˈaɪ"))
    assert prompt.token_ids == frontend.speech_prompt("Hello. Bye").token_ids


def test_punctuation_after_a_run_is_its_sentences(frontend):
    # espeak alone would drop the full stop and say "exclamation" for the "!".
    prompt = frontend.speech_prompt(f"Say [[ {TOMATO} ]], please. [[ wˈaʊ ]]! Ok.")
    expected = (espeak(frontend, "Say") + [" ", *TOMATO, ",", " "] + espeak(frontend, "please."),
                [*"wˈaʊ", "!"], espeak(frontend, "Ok."))
    assert prompt.token_ids == ids_of(frontend, *expected)
    assert prompt.token_ids == frontend.speech_prompt("Say tomato, please. Wow! Ok.").token_ids


def test_two_runs(frontend):
    prompt = frontend.speech_prompt("[[ həlˈoʊ ]] [[ ðˈɛɹ ]] friend.")
    assert prompt.token_ids == ids_of(frontend, [*"həlˈoʊ", " ", *"ðˈɛɹ", " ", *espeak(frontend, "friend.")])
    # Runs with no whitespace between them are one word, as in Piper.
    assert frontend.speech_prompt("[[ʃ]][[iː]]").token_ids == ids_of(frontend, list("ʃiː"))


def test_an_empty_run_says_nothing(frontend):
    assert frontend.speech_prompt("Hello [[ ]] world.").token_ids == frontend.speech_prompt("Hello world.").token_ids
    assert frontend.speech_prompt("Hello[[]]world.").token_ids == frontend.speech_prompt("Hello world.").token_ids
    with pytest.raises(ValueError, match="nothing to speak"):
        frontend.speech_prompt("[[ ]]")


def test_an_unterminated_run_is_text(frontend):
    text = "Say [[ hello there."
    prompt = frontend.speech_prompt(text)
    assert prompt.token_ids == ids_of(frontend, *frontend.phonemizer.sentences(normalize(text).text))


def test_unknown_symbols_are_refused_by_name(frontend, prompt_frontend):
    with pytest.raises(PhonemesRefused, match=r"unknown phoneme 'ʧ' \(U\+02A7\) in \[\[ ʧiːz \]\]") as refused:
        frontend.speech_prompt("Say [[ ʧiːz ]] now.")
    assert refused.value.param == "input" and "en-us" in str(refused.value)
    # Every one, once (this voice has no ɝ: espeak writes ɜː and ɚ).
    with pytest.raises(PhonemesRefused, match=r"phonemes 'ʧ' \(U\+02A7\), 'ɝ' \(U\+025D\) in \[\[ ʧɝʧ \]\]"):
        prompt_frontend.prepare("Fine [[ ok ]] then [[ ʧɝʧ ]].", "joe")
    # A sentence's frame and pads have ids, but are no sounds.
    for framing in "^$_":
        with pytest.raises(PhonemesRefused):
            prompt_frontend.check_phonemes(f"a{framing}")
    # A long run is quoted short.
    with pytest.raises(PhonemesRefused) as refused:
        prompt_frontend.check_phonemes("ʧ" + "a" * 10_000)
    assert len(str(refused.value)) < 400


def test_espeaks_own_phonemes_are_accepted(frontend, prompt_frontend):
    assert prompt_frontend.reads_phonemes
    for sentence in eval_sentences():
        phonemes = "".join(p for s in frontend.phonemizer.sentences(sentence) for p in s)
        prompt_frontend.check_phonemes(phonemes)
    prompt_frontend.check_phonemes("  \n ")  # whitespace only: no words, nothing refused


def test_precomposed_symbols_are_read_as_espeak_writes_them(frontend):
    # "ç" written as one code point is espeak's "c" and cedilla (NFD).
    assert frontend.speech_prompt("[[ \u00e7a ]]").token_ids == ids_of(frontend, ["c", "\u0327", "a"])


def test_runs_count_towards_the_prompts_limits(frontend, prompt_frontend):
    run = " ".join(["ba"] * 100)  # 299 symbols, each its id and a pad
    with pytest.raises(PromptTooLong) as too_long:
        prompt_frontend.prepare(f"Hello [[ {run} ]]", "joe", max_tokens=500)
    hello = len(frontend.phonemizer.ids(espeak(frontend, "Hello")))
    # Hello's ids, the word separator and the run's, and the step slot.
    assert too_long.value.tokens == hello + 2 * (1 + len(run)) + 1 and too_long.value.limit == 500
    with pytest.raises(PromptTooLong) as too_long:
        frontend.speech_prompt(f"[[ {run} {run} ]]")
    assert too_long.value.limit == MAX_RUN_PHONEME_IDS


def check_words(frontend, prompt, expected: list[str]) -> None:
    assert [w.word for w in prompt.words] == expected
    seconds = prompt.num_frames * HOP_SAMPLES / frontend.sample_rate
    for word in prompt.words:
        assert 0 <= word.start < word.end <= seconds + 1e-9, word
    for before, after in zip(prompt.words, prompt.words[1:]):
        assert before.end <= after.start + 1e-9, (before, after)


def test_a_run_is_a_word_of_the_timestamps(frontend):
    prompt = frontend.speech_prompt(f"Say [[ {TOMATO} ]], please.")
    check_words(frontend, prompt, ["Say", f"[[ {TOMATO} ]]", "please."])
    # The same frames as the word it says.
    spoken = frontend.speech_prompt("Say tomato, please.")
    assert [(w.start, w.end) for w in prompt.words] == [(w.start, w.end) for w in spoken.words]


def test_a_run_of_several_words_is_one_written_word(frontend):
    prompt = frontend.speech_prompt("Well, [[ həlˈoʊ ðɛɹ ]] friend. [[ bˈaɪ ]]")
    check_words(frontend, prompt, ["Well,", "[[ həlˈoʊ ðɛɹ ]]", "friend.", "[[ bˈaɪ ]]"])
    spoken = frontend.speech_prompt("Well, hello there friend. Bye")
    assert prompt.words[1].start == spoken.words[1].start and prompt.words[1].end == spoken.words[2].end


def old_path(frontend, text: str) -> TeacherOutput:
    """What the front end did before it read phonemes inline: normalize, espeak, a run per sentence."""
    sentences = frontend.phonemizer.sentences(normalize(text, "english").text)
    return TeacherOutput.concatenate([frontend.teacher.run(frontend.phonemizer.ids(s), TeacherScales()) for s in sentences])


def test_text_without_runs_gives_the_same_prompt(frontend):
    for text in [*eval_sentences(), "Brackets [like this], a ]] first and a [[ last."]:
        prompt, expected = frontend.speech_prompt(text), old_path(frontend, text)
        assert prompt.token_ids == expected.phoneme_ids.tolist(), text
        assert prompt.num_frames == expected.num_frames
        assert np.array_equal(prompt.conditioning.numpy(), expected.prior), text
