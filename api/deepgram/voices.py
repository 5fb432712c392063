"""Deepgram model ids (`aura-2-thalia-en`, `aura-asteria-en`) → this server's voices."""
from __future__ import annotations

import re

from api.speech.catalog import Catalog
from api.speech.errors import SpeechError
from api.http.quoting import quoted

# Deepgram's English Aura voices by how they sound (female / male), so that a model id maps to a
# voice of the same kind where the served model has several (Orpheus, Qwen3-TTS CustomVoice), and
# to its one voice otherwise (joe, a Qwen3-TTS VoiceDesign checkpoint's "designed").
FEMININE = ("thalia", "andromeda", "helena", "amalthea", "asteria", "athena", "aurora", "callista", "cordelia",
            "cora", "delia", "electra", "harmonia", "hera", "iris", "janus", "juno", "luna", "minerva", "ophelia",
            "pandora", "phoebe", "selene", "stella", "theia", "vesta")
MASCULINE = ("apollo", "arcas", "aries", "atlas", "draco", "hermes", "hyperion", "jupiter", "mars", "neptune",
             "odysseus", "orion", "orpheus", "perseus", "pluto", "saturn", "zeus", "angus", "helios")
# The served families' voices of each kind: Orpheus's, then Qwen3-TTS CustomVoice's speakers.
FEMININE_VOICES = ("tara", "leah", "jess", "mia", "zoe", "vivian", "serena", "ono_anna", "sohee")
MASCULINE_VOICES = ("leo", "dan", "zac", "ryan", "aiden", "uncle_fu", "dylan", "eric")
DEFAULT_MODEL = "aura-2-thalia-en"
_MODEL_ID = re.compile(r"aura(?:-2)?-([a-z]+)-([a-z]{2})")


class UnknownModel(ValueError):
    """A model id that is neither Deepgram's nor one of this server's model or voice names."""


def deepgram_voice(model: str, catalog: Catalog, owner: str | None = None) -> str:
    """The served voice a `model` query parameter means: a voice of the library `owner` may use
    (its name or id), a Deepgram Aura id (an English voice maps to a served voice of its kind, the
    i-th of its kind to the i-th such voice, modulo their count), or the name of a served voice
    (in any case) or of the served model (its first voice)."""
    if catalog.stored_voice(model, owner) is not None:
        return model
    try:
        default = catalog.default_voice
    except SpeechError as exc:  # a model without voices of its own
        raise UnknownModel(exc.message) from None
    if (voice := catalog.own_voice(model)) is not None:
        return voice
    if model in catalog.model_names:
        return default
    match = _MODEL_ID.fullmatch(model)
    if match is None or match.group(2) != "en" or match.group(1) not in FEMININE + MASCULINE:
        raise UnknownModel(
            f"No such model: {quoted(model)}. This server speaks English Aura ids (e.g. {DEFAULT_MODEL}), its voices "
            f"({', '.join(catalog.voices)}) and its model ({catalog.model_name})"
        )
    name = match.group(1)
    kind, ours = (FEMININE, FEMININE_VOICES) if name in FEMININE else (MASCULINE, MASCULINE_VOICES)
    candidates = [voice for voice in map(catalog.own_voice, ours) if voice is not None] or list(catalog.voices)
    return candidates[kind.index(name) % len(candidates)]
