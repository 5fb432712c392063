"""The listener of one request's audio: when its playback starts, what it has received, and
when it runs dry. Every part of the engine that asks how a stream stands reads this one record
(the scheduler's deadline order, admission's projection, the audio stage's chunk sizes); the
engine's request table alone writes it."""
from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(slots=True, eq=False)
class Listener:
    """Someone hearing one request's audio from its first chunk on, without pause.

    Playback starts when the first audio leaves (`first_audio_at`), or, for a later segment of a
    speech, once the audio before it has run out (`plays_after`), whichever is later. From there
    the listener runs dry at playback start + audio received; its slack is that moment - now.
    Before its first audio a request's deadline is `first_audio_due`; after, when it runs dry.

    Invariant: `samples_received` only grows; `first_audio_at` is set once, with the first
    audio; `plays_after` only moves later (the audio before keeps coming until it is all out).
    """

    sample_rate: int = 1
    first_audio_due: float = math.inf
    first_audio_at: float | None = None
    plays_after: float | None = None
    samples_received: int = 0

    @property
    def received_seconds(self) -> float:
        return self.samples_received / self.sample_rate

    @property
    def playback_start(self) -> float | None:
        """When playback started (or will, after the audio before it); None before its first audio."""
        if self.first_audio_at is None:
            return None
        return self.first_audio_at if self.plays_after is None else max(self.first_audio_at, self.plays_after)

    @property
    def runs_dry_at(self) -> float | None:
        """When everything received so far will have played; None before the first audio."""
        start = self.playback_start
        return None if start is None else start + self.received_seconds

    def slack(self, now: float) -> float | None:
        """Seconds of received audio still to play at `now` (<= 0: it has run dry); None before
        the first audio."""
        dry = self.runs_dry_at
        return None if dry is None else dry - now

    @property
    def deadline(self) -> float:
        """When this request must have made more audio: when it runs dry, or before its first
        audio, when that is due (inf: no listener waits on it)."""
        dry = self.runs_dry_at
        return self.first_audio_due if dry is None else dry

    def due_for_first_chunk(self, now: float) -> float:
        """Before its first audio: when its first chunk is needed (now, or once the audio before
        it has run out); after: when it runs dry. What the audio stage orders windows by."""
        dry = self.runs_dry_at
        if dry is not None:
            return dry
        return now if self.plays_after is None else max(now, self.plays_after)

    def received(self, samples: int, now: float) -> None:
        """Audio of `samples` samples has left for this listener at `now`."""
        if samples and self.first_audio_at is None:
            self.first_audio_at = now
        self.samples_received += samples
