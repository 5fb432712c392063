"""Voices cloned from a user's clip: what a family's encoders make of the clip once
(`VoiceCloner.clone` → `ClonedVoice`), stored by the API's voice library, and handed back to the
family's front end with every request that speaks in the voice (`PromptFrontend.prepare(clone=)`).

Modes: `x_vector` (the clip's speaker embedding only: the voice's timbre) and `in_context` (the
embedding plus the clip's codes and transcript: the model continues the clip, so prosody and
recording conditions carry over too)."""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

CloneMode = Literal["x_vector", "in_context"]
CLONE_MODES: tuple[CloneMode, ...] = ("x_vector", "in_context")


@dataclass(frozen=True)
class ClonedVoice:
    """A clip's voice as one model's encoders made it. Invariants: `model` names the model whose
    cloner made it (no other model's front end may take it); `arrays` hold plain CPU numpy arrays
    whose names and shapes that front end defines; `transcript` is set exactly when `mode` is
    in_context."""

    model: str
    mode: CloneMode
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    transcript: str | None = None

    def __post_init__(self) -> None:
        if self.mode not in CLONE_MODES:
            raise ValueError(f"mode must be one of {CLONE_MODES}, got {self.mode!r}")
        if (self.transcript is not None) != (self.mode == "in_context"):
            raise ValueError("an in_context clone has a transcript; an x_vector clone has none")


class CloneRefused(ValueError):
    """The clip or the transcript cannot make a voice for this model; `param` names the field."""

    def __init__(self, message: str, param: str = "audio") -> None:
        super().__init__(message)
        self.param = param


class VoiceCloner(ABC):
    """A model's encoders, loaded once in the API process. Invariant: `clone` is a pure function
    of its arguments (no state carries between clips), safe to call from one worker thread at a
    time, and returns a ClonedVoice whose `model` is `model_name`."""

    model_name: str
    # The rate `clone` wants its samples at (the API resamples uploads to it).
    sample_rate: int
    # Whether `clone(transcript=...)` can make an in_context voice (a codec encoder is present).
    in_context: bool

    @abstractmethod
    def clone(self, samples: np.ndarray, transcript: str | None = None) -> ClonedVoice:
        """The voice of a mono float clip at `sample_rate`: in_context with `transcript`,
        x_vector without. Raises CloneRefused for a clip or transcript it cannot use."""
