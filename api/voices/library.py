"""The voice library's rules: who sees which voice, names, limits, and making a voice from an
upload: its clip decoded and trimmed in a decoder process (api/voices/clip_decoder.py), the
model's encoders on the prompt pool's threads; never on the event loop or in the engine step.

An owner is the digest of the API key a request carried (api/http/auth.py); without keys every
voice has the owner None and every client sees them all. Another owner's voice is reported as
absent (404), never as forbidden: a key learns nothing of the others' voices.
"""
from __future__ import annotations

import asyncio
import secrets
import time
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from api.voices.clip import Clip, ClipRejected
from api.voices.clip_decoder import ClipDecoders
from api.voices.store import StoredVoice, VoiceFolder
from model.families.base import AUTO_LANGUAGE, LanguageNotSupported, PromptFrontend
from model.families.cloning import CloneRefused, VoiceCloner

MAX_NAME_CHARS = 64
MAX_DESCRIPTION_CHARS = 1024
MAX_TRANSCRIPT_CHARS = 2000
# Runs a blocking call off the event loop, on the prompt pool's threads (PromptPool.run).
RunBlocking = Callable[..., "asyncio.Future"]


class VoiceRefused(Exception):
    """An upload, lookup or deletion the library refuses. `status`: 400 (a field is wrong; `param`
    names it), 404 (no such voice for this owner), 409 (the name is taken), 413, 429 (too many
    voices); `code` a lower_snake constant."""

    def __init__(self, status: int, code: str, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.param = status, code, message, param


@dataclass(frozen=True, slots=True)
class LibraryLimits:
    """Every field positive; clip bounds in seconds of speech after silence is trimmed."""

    max_voices_per_owner: int = 100
    min_clip_seconds: float = 1.0
    max_clip_seconds: float = 30.0

    def __post_init__(self) -> None:
        if self.max_voices_per_owner < 1 or not 0 < self.min_clip_seconds < self.max_clip_seconds:
            raise ValueError("max_voices_per_owner must be >= 1 and 0 < min_clip_seconds < max_clip_seconds")


class VoiceLibrary:
    """The stored voices of this server. Invariants: `(owner, name_key(name))` is unique among
    stored voices and uploads in progress, so of two concurrent uploads of one name exactly
    one is stored; an owner holds at most `max_voices_per_owner` voices, uploads in progress
    counted; `_voices` is what the folder holds (a write completes before the voice is listed, a
    deletion is listed as gone before its folder goes). Without `decoders` it only looks voices
    up (`chorus say`): `create` refuses, and no decoder process is ever started."""

    def __init__(self, folder: VoiceFolder, frontend: PromptFrontend, run_blocking: RunBlocking,
                 limits: LibraryLimits | None = None, decoders: ClipDecoders | None = None) -> None:
        self.folder = folder
        self.frontend = frontend
        self.limits = limits or LibraryLimits()
        self._run = run_blocking
        self._decoders = decoders
        voices, self.skipped = folder.load()
        self._voices = {voice.id: voice for voice in voices}
        self._reserved: set[tuple[str | None, str]] = set()

    @classmethod
    def open(cls, root: Path, frontend: PromptFrontend, run_blocking: RunBlocking,
             limits: LibraryLimits | None = None, decoders: ClipDecoders | None = None) -> VoiceLibrary:
        return cls(VoiceFolder(root), frontend, run_blocking, limits, decoders)

    def __len__(self) -> int:
        return len(self._voices)

    async def load_encoders(self) -> None:
        """Loads the model's encoders now, on a pool thread, when it clones: a server that keeps
        a library of a model that clones is there to make voices, and loading them at the first
        upload (torch reading weights under the GIL) would hold up every stream then running."""
        if self.frontend.clones and self._decoders is not None:
            await self._run(self.frontend.voice_cloner)

    def voices(self, owner: str | None) -> list[StoredVoice]:
        """The owner's voices, oldest first."""
        return sorted((v for v in self._voices.values() if v.owner == owner), key=lambda v: (v.created_at, v.id))

    def get(self, owner: str | None, voice_id: str) -> StoredVoice:
        voice = self._voices.get(voice_id)
        if voice is None or voice.owner != owner:
            raise VoiceRefused(404, "voice_not_found", f"No voice with id '{voice_id}'", "voice_id")
        return voice

    def find(self, owner: str | None, name_or_id: str) -> StoredVoice | None:
        """The owner's voice with this id, or else this name (as `name_key` compares names);
        None if none."""
        voice = self._voices.get(name_or_id)
        if voice is not None and voice.owner == owner:
            return voice
        key = name_key(name_or_id)
        return next((v for v in self._voices.values() if v.owner == owner and name_key(v.name) == key), None)

    async def create(self, owner: str | None, name: str, audio: bytes, transcript: str | None = None,
                     language: str | None = None, description: str | None = None,
                     consent: str | None = None) -> StoredVoice:
        if self._decoders is None:
            raise RuntimeError("this voice library only looks voices up: it has no clip decoders to make one")
        if not self.frontend.clones:
            raise VoiceRefused(400, "unsupported_value", f"The model '{self.frontend.model_name}' cannot clone "
                               "voices (a Qwen3-TTS Base checkpoint can)", "audio")
        name = _checked_name(name)
        _check_text(description, MAX_DESCRIPTION_CHARS, "description")
        _check_text(transcript, MAX_TRANSCRIPT_CHARS, "transcript")
        language = self._checked_language(language)
        key = (owner, name_key(name))
        if key in self._reserved or self.find(owner, name) is not None:
            raise VoiceRefused(409, "voice_exists", f"A voice named '{name}' already exists", "name")
        in_progress = sum(1 for reserved_owner, _ in self._reserved if reserved_owner == owner)
        if len(self.voices(owner)) + in_progress >= self.limits.max_voices_per_owner:
            raise VoiceRefused(429, "too_many_voices", f"At most {self.limits.max_voices_per_owner} voices per key: "
                               "delete one first", "name")
        self._reserved.add(key)
        try:
            fields = dict(id=f"voice_{secrets.token_hex(12)}", name=name, owner=owner, model=self.frontend.model_name,
                          created_at=int(time.time()), language=language, description=description, consent=consent)
            cloner = await self._run(self.frontend.voice_cloner)  # loaded already (load_encoders)
            clip = await self._decoders.prepare(audio, cloner.sample_rate, min_seconds=self.limits.min_clip_seconds,
                                                max_seconds=self.limits.max_clip_seconds)
            voice = await self._run(self._make, fields, cloner, clip, transcript)
            self._voices[voice.id] = voice
            return voice
        except ClipRejected as exc:
            raise VoiceRefused(400, "invalid_audio", str(exc), "audio") from exc
        except CloneRefused as exc:
            raise VoiceRefused(400, "invalid_value", str(exc), exc.param) from exc
        finally:
            self._reserved.discard(key)

    def _make(self, fields: dict, cloner: VoiceCloner, clip: Clip, transcript: str | None) -> StoredVoice:
        """On a pool thread: the model's encoders, the folder written."""
        voice = StoredVoice(**fields, seconds=round(clip.seconds, 3), clone=cloner.clone(clip.samples, transcript))
        self.folder.write(voice, clip.samples, clip.sample_rate)
        return voice

    async def delete(self, owner: str | None, voice_id: str) -> StoredVoice:
        """Removes the voice: requests already speaking in it finish (they hold its arrays), new
        ones find it gone."""
        voice = self.get(owner, voice_id)
        del self._voices[voice_id]
        await self._run(self.folder.remove, voice_id)
        return voice

    def _checked_language(self, language: str | None) -> str | None:
        try:
            self.frontend.check_language(language)
        except LanguageNotSupported as exc:
            raise VoiceRefused(400, "unsupported_value", f"The model '{self.frontend.model_name}' does not read "
                               f"language '{language}'; it reads {', '.join(exc.available)}", "language") from exc
        return None if language is None or language.lower() == AUTO_LANGUAGE else language.lower()


def name_key(name: str) -> str:
    """What makes two names the same name: Unicode's compatibility caseless match (NFKC after
    case folding, as UAX #31 compares identifiers), so `Ａｎｎ` (fullwidth), `ann` and `Ann` are one
    name, as are a precomposed `é` and `e` with a combining accent."""
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", name).casefold())


def _checked_name(name: str) -> str:
    """The display name as given (less surrounding whitespace), once it is a name."""
    name = name.strip()
    if not 1 <= len(name) <= MAX_NAME_CHARS:
        raise VoiceRefused(400, "invalid_value", f"name must have 1 to {MAX_NAME_CHARS} characters", "name")
    if any(unicodedata.category(ch).startswith("C") for ch in name):
        raise VoiceRefused(400, "invalid_value", "name may not hold control or invisible format characters", "name")
    return name


def _check_text(value: str | None, limit: int, param: str) -> None:
    if value is not None and len(value) > limit:
        raise VoiceRefused(400, "invalid_value", f"{param} may have at most {limit} characters; got {len(value)}",
                           param)
