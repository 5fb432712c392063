"""Every threshold that capacity decisions read, in one validated dataclass."""
from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(slots=True)
class CapacityConfig:
    """How much delay a new request may see, and the slack levels at which the engine acts.

    Invariant: every field that is set is valid (delays and slack levels > 0, or >= 0 where 0
    means "never"); the two audio thresholds left None take the codec's own values
    (`resolve`), after which none is None but `max_queue_delay`, `skip_slack_seconds` and
    `pace_slack_seconds`, for which None means "off".
    """

    # A new request waits at most this long for its first audio, counted from when its speech
    # reached the server (its prompt's preparation included): one that cannot have it by then is
    # refused at once (HTTP 429). None turns admission off: everything starts (offline use, and
    # tests of the batching mechanics).
    max_queue_delay: float | None = 1.0
    # A decoding stream whose listener holds more than this sits out steps that carry a prompt,
    # which makes them cheaper for everyone else (a step's cost grows with its rows). None: every
    # running stream takes every step.
    skip_slack_seconds: float | None = 4.0
    # Batch-aware pacing: while two or more streams play, a decoding stream whose listener holds
    # more than this takes no step of its own; it joins the steps other work needs, and when
    # every stream holds more, the engine rests until the first of them falls to it. Streams
    # then advance together instead of one short step each (a step of one row cost 2.0 ms on the
    # 2-core machine, 0.74 ms a row at 14 rows): side by side, the server's CPU at 16 paced
    # listeners 47 % -> 41 %, at 64 107 % -> 88 %. The price, why it is off by default: a client
    # that saves the audio rather than plays it (Open WebUI fetches each sentence whole, a
    # closed-loop benchmark client) gets it at about real time past this lead while others share
    # the engine (2 closed-loop clients: 50 -> 22 audio s per s). None: every stream steps as fast
    # as it can.
    pace_slack_seconds: float | None = None
    # Below this slack (but above 0) a stream's audio leaves in first-chunk-sized pieces instead of
    # waiting for a whole chunk: small chunks cost more decoding per frame, so only where a listener
    # would otherwise run dry. 0: never (fixed chunking). None: the codec's value.
    urgent_slack_seconds: float | None = None
    # Past the step's decode budget, a window whose listener holds more than this waits for a
    # later step (first chunks and listeners closer to running dry never wait). inf: every due
    # window decodes in the step it became due. None: the codec's value.
    defer_slack_seconds: float | None = None
    # Incremental decoding feeds a stream every step while its listener holds at most this much;
    # above it, in longer pieces (cheaper per frame). Half a second is several steps even at
    # capacity, so no listener runs dry waiting for a piece.
    feed_slack_seconds: float = 0.5
    # Room estimates count at most this many newcomers: each count is a projection over every
    # stream, and between two reports (0.25 s apart) the API starts only a few speeches.
    room_limit: int = 8

    def __post_init__(self) -> None:
        for name in ("max_queue_delay", "skip_slack_seconds", "pace_slack_seconds"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"{name} must be > 0 seconds or None, got {value}")
        if self.urgent_slack_seconds is not None and not self.urgent_slack_seconds >= 0:
            raise ValueError(f"urgent_slack_seconds must be >= 0 (0: never urgent), got {self.urgent_slack_seconds}")
        if self.defer_slack_seconds is not None and not self.defer_slack_seconds >= 0:
            raise ValueError(f"defer_slack_seconds must be >= 0, got {self.defer_slack_seconds}")
        if not self.feed_slack_seconds >= 0:
            raise ValueError(f"feed_slack_seconds must be >= 0, got {self.feed_slack_seconds}")
        if self.room_limit < 1:
            raise ValueError(f"room_limit must be >= 1, got {self.room_limit}")

    @property
    def admission_on(self) -> bool:
        return self.max_queue_delay is not None

    def resolve(self, urgent_slack_seconds: float, defer_slack_seconds: float) -> CapacityConfig:
        """This config with the audio thresholds left None taken from the codec's values."""
        return replace(
            self,
            urgent_slack_seconds=urgent_slack_seconds if self.urgent_slack_seconds is None else self.urgent_slack_seconds,
            defer_slack_seconds=defer_slack_seconds if self.defer_slack_seconds is None else self.defer_slack_seconds,
        )

    @property
    def is_resolved(self) -> bool:
        """Whether the two thresholds that default to the codec's values have them."""
        return self.urgent_slack_seconds is not None and self.defer_slack_seconds is not None
