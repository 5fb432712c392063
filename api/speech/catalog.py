"""What this server offers: the served model under its own name and OpenAI's, its voices under
their own names and OpenAI's, and whether it can time words."""
from __future__ import annotations

from api.speech.errors import VOICE_NOT_FOUND, SpeechError
from model.families.base import PromptFrontend

# Model names OpenAI clients send; each means "the served model".
OPENAI_MODEL_ALIASES = ("tts-1", "tts-1-hd", "gpt-4o-mini-tts")

# OpenAI voice → the Orpheus voice of a similar character. For a model without that voice, the
# OpenAI voice at position i maps to the model's voice i (mod the number of voices).
OPENAI_VOICE_ALIASES = {
    "alloy": "tara",
    "ash": "leo",
    "ballad": "dan",
    "coral": "leah",
    "echo": "zac",
    "fable": "jess",
    "onyx": "dan",
    "nova": "mia",
    "sage": "zoe",
    "shimmer": "jess",
    "verse": "leo",
}


class Catalog:
    """Resolves requested model and voice names. Invariant: `resolve_voice` returns only voices
    the frontend can prepare; anything else is a SpeechError (404) naming the parameter."""

    def __init__(self, frontend: PromptFrontend) -> None:
        self.model_name = frontend.model_name
        self.voices = tuple(frontend.voices)
        self.word_timestamps = frontend.word_timestamps
        self.model_names = (self.model_name, *OPENAI_MODEL_ALIASES)
        self.voice_aliases = {
            alias: target if target in self.voices else self.voices[i % len(self.voices)]
            for i, (alias, target) in enumerate(OPENAI_VOICE_ALIASES.items())
            if alias not in self.voices
        }

    def resolve_model(self, name: str) -> str:
        if name not in self.model_names:
            raise SpeechError(404, "model_not_found",
                              f"The model '{name}' does not exist; this server serves '{self.model_name}'", param="model")
        return self.model_name

    def resolve_voice(self, name: str) -> str:
        if name in self.voices:
            return name
        if name in self.voice_aliases:
            return self.voice_aliases[name]
        raise SpeechError(404, VOICE_NOT_FOUND, f"The voice '{name}' does not exist; available: "
                          f"{', '.join(self.voices)} (and the OpenAI names {', '.join(self.voice_aliases)})",
                          param="voice")

    def asks_word_timestamps(self, timestamps: str | None) -> bool:
        """Whether a request's `timestamps` (absent, "none" or "word") asks for word timestamps;
        raises SpeechError (400, naming the parameter) for any other value, or for "word" when the
        served model cannot time words before it speaks them."""
        if timestamps in (None, "none"):
            return False
        if timestamps != "word":
            raise SpeechError(400, "invalid_value", f"timestamps must be 'word' or 'none'; got '{timestamps}'",
                              param="timestamps")
        if not self.word_timestamps:
            raise SpeechError(400, "unsupported_value", f"The model '{self.model_name}' cannot time words before "
                              "it speaks them (see /v1/audio/voices: its 'timestamps' list is empty); leave out "
                              "timestamps", param="timestamps")
        return True
