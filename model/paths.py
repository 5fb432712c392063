"""Where Chorus keeps files it writes once and reuses: the one place that knows the cache root."""
from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """`$CHORUS_CACHE`, else `~/.cache/chorus`: generated models (tiny-random), graph cuts of the
    joe voice, exported decoders and training data. Nothing in it is committed."""
    base = os.environ.get("CHORUS_CACHE") or Path.home() / ".cache" / "chorus"
    return Path(base)


def voice_cache(voice: str) -> Path:
    """A built-in voice's folder in the cache (its graph cuts, decoders and training runs)."""
    return cache_root() / "voices" / voice
