"""Stored voices on disk: one folder per voice under the voices directory, written atomically.

    <voices dir>/<voice id>/voice.json          the metadata (StoredVoice.metadata)
                            arrays.safetensors  what the model's encoders made of the clip
                            clip.wav            the clip itself, as the encoders took it (16-bit)

A voice is written into a hidden `.tmp-` folder, flushed, then renamed into place: a crash leaves
either the whole voice or a leftover temporary folder, which the next start removes. Deleting
renames the folder aside before removing it, so a voice is never half there.
"""
from __future__ import annotations

import json
import logging
import os
import re
import shutil
import wave
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file, save_file

from api.speech.audio.encoders import pcm16
from model.families.cloning import ClonedVoice, CloneMode

logger = logging.getLogger("chorus.api")

METADATA, ARRAYS, CLIP = "voice.json", "arrays.safetensors", "clip.wav"
FORMAT_VERSION = 1
VOICE_ID = re.compile(r"voice_[0-9a-f]{24}")
_TEMPORARY, _DELETED = ".tmp-", ".deleted-"


@dataclass(frozen=True)
class StoredVoice:
    """A voice of the library. Invariants: `id` matches VOICE_ID and names its folder; `owner`
    is the digest of the API key that made it (None when the server has no keys); `clone.model`
    is `model`."""

    id: str
    name: str
    owner: str | None
    model: str
    created_at: int
    seconds: float
    language: str | None
    description: str | None
    clone: ClonedVoice
    # OpenAI's consent recording id, when the client sent one (kept, not checked).
    consent: str | None = None

    @property
    def mode(self) -> CloneMode:
        return self.clone.mode

    def metadata(self) -> dict:
        return {"format": FORMAT_VERSION, "id": self.id, "name": self.name, "owner": self.owner, "model": self.model,
                "mode": self.mode, "created_at": self.created_at, "seconds": self.seconds, "language": self.language,
                "description": self.description, "transcript": self.clone.transcript, "consent": self.consent}

    def public(self) -> dict:
        """The voice object the API answers with (no owner: a key's digest stays on the server)."""
        return {"id": self.id, "object": "audio.voice", "type": "audio_sample", "name": self.name, "model": self.model,
                "mode": self.mode, "created_at": self.created_at, "seconds": self.seconds, "language": self.language,
                "description": self.description, "transcript": self.clone.transcript}


class CorruptVoice(ValueError):
    """A voice folder that cannot be read back."""


class VoiceFolder:
    """The voices directory. Invariant: every folder `load` returns a voice for was complete on
    disk; `write` and `remove` never leave a partial voice under a voice id."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def load(self) -> tuple[list[StoredVoice], list[str]]:
        """Every stored voice, and a line per folder skipped (corrupt, unreadable), which is
        logged; leftovers of an interrupted write or delete are removed. A folder that does not
        exist holds none (the first write makes it)."""
        voices, skipped = [], []
        if not self.root.is_dir():
            return voices, skipped
        for folder in sorted(self.root.iterdir()):
            if folder.name.startswith((_TEMPORARY, _DELETED)):
                shutil.rmtree(folder, ignore_errors=True)
                continue
            if not folder.is_dir() or not VOICE_ID.fullmatch(folder.name):
                continue
            try:
                voices.append(read_voice(folder))
            except (OSError, ValueError, KeyError, TypeError) as exc:
                skipped.append(f"{folder}: {exc}")
                logger.warning("skipping the stored voice %s: %s", folder, exc)
        return voices, skipped

    def write(self, voice: StoredVoice, clip: np.ndarray, sample_rate: int) -> None:
        final = self.root / voice.id
        temporary = self.root / f"{_TEMPORARY}{voice.id}"
        shutil.rmtree(temporary, ignore_errors=True)
        temporary.mkdir(parents=True)
        try:
            save_file({name: np.ascontiguousarray(array) for name, array in voice.clone.arrays.items()},
                      str(temporary / ARRAYS))
            _write_wav(temporary / CLIP, clip, sample_rate)
            (temporary / METADATA).write_text(json.dumps(voice.metadata(), ensure_ascii=False, indent=1))
            for name in (ARRAYS, CLIP, METADATA):
                _fsync(temporary / name)
            os.replace(temporary, final)
            _fsync(self.root)
        except BaseException:
            shutil.rmtree(temporary, ignore_errors=True)
            raise

    def remove(self, voice_id: str) -> None:
        if not VOICE_ID.fullmatch(voice_id):
            raise ValueError(f"not a voice id: {voice_id!r}")
        aside = self.root / f"{_DELETED}{voice_id}"
        os.replace(self.root / voice_id, aside)
        shutil.rmtree(aside, ignore_errors=True)


def read_voice(folder: Path) -> StoredVoice:
    meta = json.loads((folder / METADATA).read_text())
    if meta.get("format") != FORMAT_VERSION:
        raise CorruptVoice(f"unknown format {meta.get('format')!r}")
    if meta["id"] != folder.name:
        raise CorruptVoice(f"its metadata names {meta['id']!r}")
    try:
        arrays = load_file(str(folder / ARRAYS))
    except Exception as exc:  # safetensors raises its own error types for a damaged file
        raise CorruptVoice(f"{ARRAYS}: {exc}") from exc
    if not (folder / CLIP).is_file():
        raise CorruptVoice(f"{CLIP} is missing")
    clone = ClonedVoice(str(meta["model"]), meta["mode"], arrays, meta.get("transcript"))
    return StoredVoice(id=meta["id"], name=str(meta["name"]), owner=meta.get("owner"), model=clone.model,
                       created_at=int(meta["created_at"]), seconds=float(meta["seconds"]),
                       language=meta.get("language"), description=meta.get("description"), clone=clone,
                       consent=meta.get("consent"))


def _write_wav(path: Path, clip: np.ndarray, sample_rate: int) -> None:
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(sample_rate)
        out.writeframes(pcm16(clip))


def _fsync(path: Path) -> None:
    """Flushes a file's (or a folder's entries') data to disk, so a rename that follows a crash
    never points at unwritten contents."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
