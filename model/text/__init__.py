"""Text processing ahead of a voice's front end: normalization (what written text says aloud)."""
from model.text.normalize import LANGUAGES, Normalized, as_written, normalize

__all__ = ["LANGUAGES", "Normalized", "as_written", "normalize"]
