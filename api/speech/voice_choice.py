"""A speech's voice as its request chose it: the voice, the language and the instructions (and,
for a voice of the library, what the model's encoders made of its clip), carried as one value
from the route through planning and the prompt pool to the front end's `prepare`."""
from __future__ import annotations

from dataclasses import dataclass

from model.families.cloning import ClonedVoice


@dataclass(frozen=True, slots=True)
class VoiceChoice:
    """How a speech is voiced, the same for every segment of it. Invariant (Catalog.voice_choice
    makes it, api/speech/catalog.py): `name` is one of the served voices or the id of a stored
    voice whose `clone` this is (the speech keeps it, so deleting the voice does not stop it),
    `language` one of the model's languages in lower case (None: AUTO_LANGUAGE, the model's own
    choice), and `instructions` are None unless the model reads them (a model that does not
    accepts and ignores them); `normalize` is True only for a model that reads raw text, whose
    text the prompt pool then reads through the English normalizer first (model/text)."""

    name: str
    language: str | None = None
    instructions: str | None = None
    clone: ClonedVoice | None = None
    normalize: bool = False
