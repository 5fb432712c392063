"""joe's espeak-ng calls give Piper's phonemes, and no longer grow the process on every call."""
from __future__ import annotations

import pytest

from tests.voice_packages import require_voice_packages

require_voice_packages()

from piper.config import PiperConfig  # noqa: E402
from piper.phonemize_espeak import EspeakPhonemizer  # noqa: E402

from evaluation import eval_sentences, paragraphs  # noqa: E402
from model.families.joe.espeak import ESPEAK_LOCK, Espeak  # noqa: E402
from model.families.joe.teacher import voice_config  # noqa: E402

AWKWARD = [
    "Dr. Smith paid $3.50 on 1/2/2024; wow!",
    "Well: it's 10:45, isn't it",  # no final terminator
    "Café naïve façade, déjà vu.",
    "Hmm... OK?! (Really.) Yes—no.",
    "",
    "   ",
    "Sprechen Sie Deutsch? Bonjour, monsieur.",
]


def rss_kib() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4


@pytest.mark.parametrize("texts", [eval_sentences(), paragraphs(), AWKWARD], ids=["sentences", "paragraphs", "awkward"])
def test_phonemes_are_pipers(texts):
    config = PiperConfig.from_dict(voice_config())
    ours = Espeak()
    for text in texts:
        with ESPEAK_LOCK:
            expected = EspeakPhonemizer().phonemize(config.espeak_voice, text, vowel_clusters=config.vowel_clusters)
        assert ours.sentences(config.espeak_voice, text, config.vowel_clusters) == expected, text


def test_a_call_in_another_voice_sets_it_and_the_next_sets_ours_back():
    config = PiperConfig.from_dict(voice_config())
    ours, text = Espeak(), "Hello there, my friend."
    for voice in ("de", config.espeak_voice, "de", config.espeak_voice):
        with ESPEAK_LOCK:
            expected = EspeakPhonemizer().phonemize(voice, text, vowel_clusters=config.vowel_clusters)
        assert ours.sentences(voice, text, config.vowel_clusters) == expected, voice


def test_phonemizing_does_not_grow_the_process_by_the_voice_change_each_call():
    # espeak-ng keeps a copy of the voice on every voice change; Piper's phonemize changes it on
    # every call (about 1.3 KB each, measured). Ours sets it once: 5,000 calls may grow the process
    # only by what get_phonemes itself keeps (about 0.5 KB a call), well under 1.3 KB a call.
    config = PiperConfig.from_dict(voice_config())
    espeak = Espeak()
    text = "The quick brown fox jumps over the lazy dog."
    for _ in range(200):  # allocator pools settle first
        espeak.sentences(config.espeak_voice, text)
    before = rss_kib()
    for _ in range(5000):
        espeak.sentences(config.espeak_voice, text)
    assert (rss_kib() - before) / 5000 < 1.0
