"""Deepgram's model ids and audio query parameters as this server reads them."""
from __future__ import annotations

import pytest

from api.speech.catalog import Catalog
from api.deepgram.formats import REST_ENCODINGS, SOCKET_ENCODINGS, InvalidAudioQuery, audio_choice
from api.deepgram.voices import FEMININE, MASCULINE, UnknownModel, deepgram_voice


class Frontend:
    word_timestamps = reads_instructions = clones = always_normalizes = False
    languages = ("auto", "english")

    def __init__(self, name: str, voices: tuple[str, ...]) -> None:
        self.model_name, self.voices = name, voices


ORPHEUS = Catalog(Frontend("orpheus", ("tara", "leah", "jess", "leo", "dan", "mia", "zac", "zoe")))
JOE = Catalog(Frontend("joe", ("joe",)))


def test_aura_ids_map_to_a_voice_of_their_kind():
    assert deepgram_voice("aura-2-thalia-en", ORPHEUS) == "tara"
    assert deepgram_voice("aura-2-andromeda-en", ORPHEUS) == "leah"
    assert deepgram_voice("aura-2-apollo-en", ORPHEUS) == "leo"
    assert deepgram_voice("aura-asteria-en", ORPHEUS) in ("tara", "leah", "jess", "mia", "zoe")
    assert {deepgram_voice(f"aura-2-{name}-en", ORPHEUS) for name in MASCULINE} == {"leo", "dan", "zac"}
    assert {deepgram_voice(f"aura-2-{name}-en", JOE) for name in FEMININE + MASCULINE} == {"joe"}


def test_own_names_pass_and_anything_else_is_unknown():
    assert deepgram_voice("zac", ORPHEUS) == "zac" and deepgram_voice("joe", JOE) == "joe"
    assert deepgram_voice("tts-1", JOE) == "joe"  # a model name: its first voice
    for model in ("aura-2-nobody-en", "aura-2-thalia-es", "thalia", ""):
        with pytest.raises(UnknownModel):
            deepgram_voice(model, ORPHEUS)


def pair(choice) -> tuple[str, int]:
    return choice.response_format, choice.sample_rate


def test_defaults_follow_deepgram():
    assert pair(audio_choice(REST_ENCODINGS, None, None, None, "mp3")) == ("mp3", 22050)
    assert pair(audio_choice(REST_ENCODINGS, "linear16", None, None, "mp3")) == ("wav", 24000)
    assert pair(audio_choice(REST_ENCODINGS, "mulaw", None, None, "mp3")) == ("wav-mulaw", 8000)
    assert pair(audio_choice(REST_ENCODINGS, "mulaw", "none", "16000", "mp3")) == ("mulaw", 16000)
    assert pair(audio_choice(SOCKET_ENCODINGS, None, None, None, "linear16")) == ("pcm", 24000)
    assert audio_choice(SOCKET_ENCODINGS, "alaw", None, None, "linear16").media_type == "audio/PCMA"


@pytest.mark.parametrize("encoding, container, rate, param", [
    ("flac24", None, None, "encoding"),
    ("mp3", "wav", None, "container"),
    ("linear16", None, "44100", "sample_rate"),
    ("linear16", None, "fast", "sample_rate"),
])
def test_what_deepgram_does_not_offer_is_refused_naming_the_parameter(encoding, container, rate, param):
    with pytest.raises(InvalidAudioQuery) as info:
        audio_choice(REST_ENCODINGS, encoding, container, rate, "mp3")
    assert info.value.param == param
    with pytest.raises(InvalidAudioQuery):
        audio_choice(SOCKET_ENCODINGS, "mp3", None, None, "linear16")
