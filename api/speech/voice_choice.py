"""A speech's voice as its request chose it: the voice, the language and the instructions, carried
as one value from the route through planning and the prompt pool to the front end's `prepare`."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class VoiceChoice:
    """How a speech is voiced, the same for every segment of it. Invariant (Catalog.voice_choice
    makes it, api/speech/catalog.py): `name` is one of the served voices, `language` one of the
    model's languages in lower case (None: AUTO_LANGUAGE, the model's own choice), and
    `instructions` are None unless the model reads them (a model that does not accepts and
    ignores them)."""

    name: str
    language: str | None = None
    instructions: str | None = None
