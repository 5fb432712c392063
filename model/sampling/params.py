from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(slots=True)
class SamplingParams:
    """How one request picks its next token; every field is valid once constructed.

    temperature 0 means greedy (argmax after the repetition penalty); top_k 0 and top_p 1 turn
    those filters off; the stop tokens cannot be sampled before ``min_tokens`` outputs exist.
    """

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    repetition_penalty: float = 1.0
    seed: int | None = None
    max_tokens: int = 1200
    min_tokens: int = 0

    def __post_init__(self) -> None:
        # NOTE: comparisons are written so that NaN fails them too.
        if not self.temperature >= 0.0:
            raise ValueError(f"temperature must be >= 0 (0 means greedy), got {self.temperature}")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if not _is_int(self.top_k) or self.top_k < 0:
            raise ValueError(f"top_k must be an int >= 0 (0 disables it), got {self.top_k!r}")
        if not self.repetition_penalty > 0.0:
            raise ValueError(f"repetition_penalty must be > 0, got {self.repetition_penalty}")
        if self.seed is not None and not _is_int(self.seed):
            raise ValueError(f"seed must be an int or None, got {self.seed!r}")
        if not _is_int(self.max_tokens) or self.max_tokens < 1:
            raise ValueError(f"max_tokens must be an int >= 1, got {self.max_tokens!r}")
        if not _is_int(self.min_tokens) or not 0 <= self.min_tokens <= self.max_tokens:
            raise ValueError(
                f"min_tokens must be an int in [0, max_tokens={self.max_tokens}], got {self.min_tokens!r}"
            )

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    def replace(self, **changes: Any) -> SamplingParams:
        return dataclasses.replace(self, **changes)
