"""What this server offers: the served model under its own name and OpenAI's, its voices under
their own names and OpenAI's, the languages it reads, whether it reads instructions and whether it
can time words; and a request's voice, language and instructions resolved into a VoiceChoice."""
from __future__ import annotations

from api.speech.errors import VOICE_NOT_FOUND, SpeechError
from api.speech.voice_choice import VoiceChoice
from api.voices.library import VoiceLibrary
from api.voices.store import StoredVoice
from model.families.base import AUTO_LANGUAGE, PromptFrontend

# Model names OpenAI clients send; each means "the served model".
OPENAI_MODEL_ALIASES = ("tts-1", "tts-1-hd", "gpt-4o-mini-tts")

# OpenAI voice → the voices of a similar character, one per family that has named voices (Orpheus,
# Qwen3-TTS CustomVoice): the first the model has. For a model with none of them, the OpenAI voice
# at position i maps to the model's voice i (mod the number of voices).
OPENAI_VOICE_ALIASES = {
    "alloy": ("tara", "serena"),
    "ash": ("leo", "ryan"),
    "ballad": ("dan", "aiden"),
    "coral": ("leah", "vivian"),
    "echo": ("zac", "aiden"),
    "fable": ("jess", "ryan"),
    "onyx": ("dan", "uncle_fu"),
    "nova": ("mia", "vivian"),
    "sage": ("zoe", "serena"),
    "shimmer": ("jess", "sohee"),
    "verse": ("leo", "ryan"),
}
# The most characters of a request's instructions (OpenAI's limit).
MAX_INSTRUCTIONS_CHARS = 4096


class Catalog:
    """Resolves requested model and voice names. Invariant: `resolve_voice` returns only voices
    the frontend can prepare, `resolve_language` only languages it reads; anything else is a
    SpeechError naming the parameter."""

    def __init__(self, frontend: PromptFrontend, library: VoiceLibrary | None = None,
                 normalize_by_default: bool = False) -> None:
        self.library = library
        # Whether a request that says nothing of `normalize` gets it (a model that reads raw text).
        self.normalize_by_default = normalize_by_default
        self.always_normalizes = frontend.always_normalizes
        self.model_name = frontend.model_name
        self.voices = tuple(frontend.voices)
        self.languages = tuple(frontend.languages)
        self.reads_instructions = frontend.reads_instructions
        self.word_timestamps = frontend.word_timestamps
        self.clones = frontend.clones
        self.model_names = (self.model_name, *OPENAI_MODEL_ALIASES)
        self._by_key = {voice.lower(): voice for voice in self.voices}
        self.voice_aliases = {
            alias: self._alias_target(i, characters)
            for i, (alias, characters) in enumerate(OPENAI_VOICE_ALIASES.items())
            if self.voices and alias not in self._by_key
        }

    def _alias_target(self, i: int, characters: tuple[str, ...]) -> str:
        ours = [self._by_key[name] for name in characters if name in self._by_key]
        return ours[0] if ours else self.voices[i % len(self.voices)]

    @property
    def default_voice(self) -> str:
        """The voice a request that names none gets: the model's first."""
        if not self.voices:
            raise self._no_voices()
        return self.voices[0]

    def _no_voices(self, name: str | None = None) -> SpeechError:
        asked = f"No voice '{name}': the" if name else "The"
        return SpeechError(404, VOICE_NOT_FOUND, f"{asked} model '{self.model_name}' has no voices of its own: it "
                           "speaks in voices cloned from a clip (POST /v1/audio/voices, then use its id or name)",
                           param="voice")

    def resolve_model(self, name: str) -> str:
        if name not in self.model_names:
            raise SpeechError(404, "model_not_found",
                              f"The model '{name}' does not exist; this server serves '{self.model_name}'", param="model")
        return self.model_name

    def own_voice(self, name: str) -> str | None:
        """The served voice `name` names (in any case), in its own spelling; None if none does."""
        return self._by_key.get(name.lower())

    def resolve_voice(self, name: str) -> str:
        """A served voice (matched in any case) or an OpenAI alias of one."""
        if (voice := self.own_voice(name)) is not None:
            return voice
        if name in self.voice_aliases:
            return self.voice_aliases[name]
        if not self.voices:
            raise self._no_voices(name)
        raise SpeechError(404, VOICE_NOT_FOUND, f"The voice '{name}' does not exist; available: "
                          f"{', '.join(self.voices)} (and the OpenAI names {', '.join(self.voice_aliases)})",
                          param="voice")

    def resolve_language(self, name: str | None) -> str | None:
        """The model's name for `name` (any case); None for AUTO_LANGUAGE or no name."""
        language = (name or AUTO_LANGUAGE).lower()
        if language not in self.languages:
            raise SpeechError(400, "unsupported_value", f"The model '{self.model_name}' does not read language "
                              f"'{name}'; it reads {', '.join(self.languages)}", param="language")
        return None if language == AUTO_LANGUAGE else language

    def stored_voice(self, name: str, owner: str | None) -> StoredVoice | None:
        """The library's voice `owner` calls `name` (its id or name), unless a served voice has
        that name; None if none."""
        if self.library is None or self.own_voice(name) is not None:
            return None
        return self.library.find(owner, name)

    def voice_choice(self, voice: str, language: str | None = None, instructions: str | None = None, *,
                     owner: str | None = None, normalize: bool | None = None) -> VoiceChoice:
        """The request's voice (a served one, an OpenAI alias, or a voice of the library `owner`
        may use), language (for a stored voice, its own when the request names none),
        instructions and text normalization (None: the server's default), each checked
        (SpeechError naming the parameter); instructions are dropped for a model that does not
        read them."""
        if instructions is not None and len(instructions) > MAX_INSTRUCTIONS_CHARS:
            raise SpeechError(400, "invalid_value", f"instructions may have at most {MAX_INSTRUCTIONS_CHARS} "
                              f"characters; got {len(instructions)}", param="instructions")
        instructions = instructions if self.reads_instructions else None
        stored = self.stored_voice(voice, owner)
        if stored is None:
            name, clone = self.resolve_voice(voice), None
        elif stored.model != self.model_name:
            raise SpeechError(400, "invalid_value", f"The voice '{voice}' was cloned for the model '{stored.model}'; "
                              f"this server serves '{self.model_name}'", param="voice")
        else:
            name, clone, language = stored.id, stored.clone, language or stored.language
        resolved = self.resolve_language(language)
        return VoiceChoice(name, resolved, instructions, clone, self._normalizes(normalize, resolved))

    def _normalizes(self, asked: bool | None, language: str | None) -> bool:
        """Whether the prompt pool normalizes the text: never for a model that always does itself;
        for the others as asked, or by the server's default. The normalizer reads English."""
        if self.always_normalizes:
            return False
        wanted = self.normalize_by_default if asked is None else asked
        if wanted and language not in (None, "english"):
            if asked:
                raise SpeechError(400, "unsupported_value", f"normalize reads English text; the request's language "
                                  f"is '{language}' (leave normalize out, or false)", param="normalize")
            return False  # the server's default does not apply to other languages
        return wanted

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
