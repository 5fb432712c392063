"""Deepgram model ids (`aura-2-thalia-en`, `aura-asteria-en`) → this server's voices."""
from __future__ import annotations

import re

from api.speech.catalog import Catalog
from api.http.quoting import quoted

# Deepgram's English Aura voices by how they sound (female / male), so that a model id maps to a
# voice of the same kind where the served model has several (Orpheus), and to its one voice
# otherwise (joe).
FEMININE = ("thalia", "andromeda", "helena", "amalthea", "asteria", "athena", "aurora", "callista", "cordelia",
            "cora", "delia", "electra", "harmonia", "hera", "iris", "janus", "juno", "luna", "minerva", "ophelia",
            "pandora", "phoebe", "selene", "stella", "theia", "vesta")
MASCULINE = ("apollo", "arcas", "aries", "atlas", "draco", "hermes", "hyperion", "jupiter", "mars", "neptune",
             "odysseus", "orion", "orpheus", "perseus", "pluto", "saturn", "zeus", "angus", "helios")
# Orpheus's voices of each kind.
ORPHEUS_FEMININE = ("tara", "leah", "jess", "mia", "zoe")
ORPHEUS_MASCULINE = ("leo", "dan", "zac")
DEFAULT_MODEL = "aura-2-thalia-en"
_MODEL_ID = re.compile(r"aura(?:-2)?-([a-z]+)-([a-z]{2})")


class UnknownModel(ValueError):
    """A model id that is neither Deepgram's nor one of this server's model or voice names."""


def deepgram_voice(model: str, catalog: Catalog) -> str:
    """The served voice a `model` query parameter means: a Deepgram Aura id (an English voice
    maps to a served voice of its kind, the i-th of its kind to the i-th such voice, modulo their
    count), or the name of a served voice or of the served model (its first voice)."""
    if model in catalog.voices:
        return model
    if model in catalog.model_names:
        return catalog.voices[0]
    match = _MODEL_ID.fullmatch(model)
    if match is None or match.group(2) != "en" or match.group(1) not in FEMININE + MASCULINE:
        raise UnknownModel(
            f"No such model: {quoted(model)}. This server speaks English Aura ids (e.g. {DEFAULT_MODEL}), its voices "
            f"({', '.join(catalog.voices)}) and its model ({catalog.model_name})"
        )
    name = match.group(1)
    kind, ours = (FEMININE, ORPHEUS_FEMININE) if name in FEMININE else (MASCULINE, ORPHEUS_MASCULINE)
    candidates = [voice for voice in ours if voice in catalog.voices] or list(catalog.voices)
    return candidates[kind.index(name) % len(candidates)]
