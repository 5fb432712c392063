"""espeak-ng through the bridge piper-tts bundles, with the voice set once, not on every call.

espeak-ng copies the voice on every voice change and frees the copy only when it synthesizes
audio, which phonemizing never does (a known espeak-ng behaviour; echogarden-project/echogarden
#64 traced it to `DoVoiceChange`). Piper's `EspeakPhonemizer.phonemize` sets the voice on every
call, and the API process phonemizes every prompt: measured here, 1.3 KB of RSS per call that
never came back (20,000 calls: +26 MB), which was most of the API's slow growth in the reliability
soak. `get_phonemes` itself still keeps about 0.5 KB a call inside espeak-ng; that is left to
upstream.

The output is Piper's, phoneme for phoneme (tests/model/families/joe/test_espeak.py compares
the two on the evaluation sentences, the paragraphs and awkward inputs).
"""
from __future__ import annotations

import re
import threading
import unicodedata

from piper import espeakbridge
from piper.phonemize_espeak import ESPEAK_DATA_DIR, _merge_known_vowel_clusters

# espeak-ng keeps one global state per process (voice, data dir), so calls are serialized.
ESPEAK_LOCK = threading.Lock()
# espeak marks words it reads in another language's rules with "(xx)" switches: not phonemes.
_LANGUAGE_SWITCH = re.compile(r"\([^)]+\)")
# Clause ends that are not sentence ends keep a space after them, as Piper's ids expect.
_CLAUSE_PAUSES = (",", ":", ";")


class Espeak:
    """The process's espeak-ng. Invariant: the voice espeak-ng holds is `_voice`, set only when a
    call asks for another one, provided nothing else in the process sets espeak-ng's voice
    (Piper's own phonemizer does, on every call: the serving path never uses it); every call
    holds ESPEAK_LOCK."""

    _initialized = False
    _voice: str | None = None

    def __init__(self) -> None:
        with ESPEAK_LOCK:
            if not Espeak._initialized:
                espeakbridge.initialize(str(ESPEAK_DATA_DIR))
                Espeak._initialized = True

    def sentences(self, voice: str, text: str, vowel_clusters=None) -> list[list[str]]:
        """`text`'s phonemes (single code points, clusters merged), one list per sentence."""
        with ESPEAK_LOCK:
            if Espeak._voice != voice:
                espeakbridge.set_voice(voice)
                Espeak._voice = voice
            clauses = espeakbridge.get_phonemes(text)
        sentences: list[list[str]] = []
        current: list[str] = []
        for phonemes, terminator, ends_sentence in clauses:
            spoken = _LANGUAGE_SWITCH.sub("", phonemes) + terminator
            if terminator in _CLAUSE_PAUSES:
                spoken += " "
            current.extend(unicodedata.normalize("NFD", spoken))
            if ends_sentence:
                sentences.append(current)
                current = []
        if current:  # text that ends without a sentence terminator
            sentences.append(current)
        if vowel_clusters:
            sentences = [_merge_known_vowel_clusters(s, vowel_clusters) for s in sentences]
        return sentences
