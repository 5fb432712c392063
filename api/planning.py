"""Turns one speech request's text into engine requests that each fit the model's context."""
from __future__ import annotations

from api.settings import ApiSettings
from api.synthesis import Segment
from api.text_split import split_text
from model.families.base import PromptFrontend
from model.sampling import SamplingParams


def plan_segments(
    text: str,
    voice: str,
    frontend: PromptFrontend,
    settings: ApiSettings,
    context_tokens: int,
    seed: int | None = None,
) -> list[Segment]:
    """One segment when the whole text fits (prompt + its output budget within the context),
    otherwise the fewest sentence-aligned segments that each fit."""
    base: SamplingParams = frontend.default_sampling()

    def output_budget(piece: str) -> int:
        return min(base.max_tokens, settings.max_tokens_for(piece))

    def fits(piece: str) -> bool:
        prompt_tokens = len(frontend.prepare(piece, voice).token_ids)
        return prompt_tokens + output_budget(piece) <= context_tokens

    stripped = text.strip()
    pieces = [stripped] if fits(stripped) else split_text(text, fits)
    return [Segment(piece, base.replace(max_tokens=output_budget(piece), seed=seed)) for piece in pieces]
