"""When a dead engine core is started again, and when to stop trying."""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field


@dataclass(slots=True)
class RestartPolicy:
    """Restarts with a doubling delay, at most `max_restarts` within any `window_seconds`; past
    that the server should exit so that an outside supervisor (systemd, Kubernetes, Ray) takes
    over. Invariant: `next_delay` returns None exactly when `max_restarts` restarts already fall
    within the window; otherwise first_delay * 2**(restarts in the window), capped at max_delay."""

    max_restarts: int = 5
    window_seconds: float = 300.0
    first_delay: float = 0.5
    max_delay: float = 10.0
    _recent: deque[float] = field(default_factory=deque)

    def __post_init__(self) -> None:
        if self.max_restarts < 0 or self.window_seconds <= 0 or self.first_delay < 0 or self.max_delay < self.first_delay:
            raise ValueError("max_restarts >= 0, window_seconds > 0 and 0 <= first_delay <= max_delay")

    def next_delay(self, now: float) -> float | None:
        """Seconds to wait before the next restart (which this counts), or None: give up."""
        while self._recent and now - self._recent[0] > self.window_seconds:
            self._recent.popleft()
        if len(self._recent) >= self.max_restarts:
            return None
        delay = min(self.max_delay, self.first_delay * 2 ** len(self._recent))
        self._recent.append(now)
        return delay
