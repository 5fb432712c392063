"""The speech request body: OpenAI's fields and limits, plus documented extensions (the language,
the sample rate, a seed, word timestamps in the event stream, text normalization, pronunciations,
and the G.711 response formats `mulaw` and `alaw`). An `input` that starts with `<speak>` is SSML
(api/speech/markup.py)."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from api.speech.audio.encoders import RESPONSE_FORMATS
from api.speech.catalog import MAX_INSTRUCTIONS_CHARS

MAX_INPUT_CHARS = 4096

ResponseFormat = Literal[RESPONSE_FORMATS]  # type: ignore[valid-type]


class VoiceRef(BaseModel):
    """A voice given as an object, as OpenAI accepts for custom voices."""

    model_config = ConfigDict(extra="forbid")
    id: str = Field(min_length=1, max_length=128)


class Pronunciation(BaseModel):
    """One word's pronunciation for this request (model/text/lexicon.py checks it further: its
    case rule, exactly one of the two ways to say it)."""

    model_config = ConfigDict(extra="forbid")
    word: str = Field(min_length=1, max_length=100)
    phonemes: str | None = Field(default=None, min_length=1, max_length=200)
    say_as: str | None = Field(default=None, min_length=1, max_length=300)


# The most pronunciations one request may carry (a server-wide lexicon has no such bound).
MAX_PRONUNCIATIONS = 1000


class SpeechRequest(BaseModel):
    """POST /v1/audio/speech. Unknown fields are refused (400 naming the field), as OpenAI does."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(min_length=1, max_length=256)
    input: str = Field(min_length=1, max_length=MAX_INPUT_CHARS)
    voice: str | VoiceRef
    instructions: str | None = Field(default=None, max_length=MAX_INSTRUCTIONS_CHARS)
    response_format: ResponseFormat = "mp3"
    # Numbers must be JSON numbers: strict, so "1.5" and true are refused rather than coerced,
    # and a finite one (Python's JSON reader takes NaN and Infinity).
    speed: float = Field(default=1.0, ge=0.25, le=4.0, strict=True, allow_inf_nan=False)
    stream_format: Literal["audio", "sse"] = "audio"
    # Extensions (not in OpenAI's API): the language the input is read in (a name from
    # /v1/audio/voices; absent: "auto"), output sample rate, and a seed for reproducible audio.
    language: str | None = Field(default=None, min_length=1, max_length=64)
    sample_rate: int | None = Field(default=None, ge=8000, le=48000, strict=True)
    seed: int | None = Field(default=None, ge=0, le=2**63 - 1, strict=True)
    # "word": `speech.audio.timestamps` events among the deltas (stream_format "sse" only).
    timestamps: Literal["none", "word"] = "none"
    # Read the input through the English normalizer ("$3.50" as "three dollars and fifty cents")
    # for a model that reads raw text; absent: the server's default (joe always does).
    normalize: bool | None = Field(default=None, strict=True)
    # Words said this request's way, over the server's lexicon (docs/api.md, "Pronunciations").
    pronunciations: list[Pronunciation] | None = Field(default=None, max_length=MAX_PRONUNCIATIONS)

    @field_validator("input")
    @classmethod
    def _has_text(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("input must contain text, not only whitespace")
        return value

    @property
    def voice_name(self) -> str:
        return self.voice.id if isinstance(self.voice, VoiceRef) else self.voice
