"""The learning-rate schedule both of the voice's training commands use."""
from __future__ import annotations

import math


def warmup_cosine(step: int, peak: float, warmup_steps: int, total_steps: int, final_fraction: float) -> float:
    """Linear warm-up to `peak` over `warmup_steps`, then cosine decay to `final_fraction` of it
    at `total_steps` (held there after)."""
    if step < warmup_steps:
        return peak * (step + 1) / warmup_steps
    progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
    return peak * (final_fraction + (1 - final_fraction) * 0.5 * (1 + math.cos(math.pi * progress)))
