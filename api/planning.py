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
    speed: float = 1.0,
) -> list[Segment]:
    """One segment when the whole text fits (prompt + its outputs within the context: known
    exactly when prompt processing fixes the length, else the text's output budget), otherwise
    the fewest sentence-aligned segments that each fit."""
    base: SamplingParams = frontend.default_sampling()

    def output_budget(piece: str) -> int:
        return min(base.max_tokens, settings.max_tokens_for(piece))

    def fits(piece: str) -> bool:
        prompt = frontend.prepare(piece, voice, speed)
        outputs = frontend.expected_outputs(prompt)
        return len(prompt.token_ids) + (output_budget(piece) if outputs is None else outputs) <= context_tokens

    stripped = text.strip()
    pieces = [stripped] if fits(stripped) else split_text(text, fits)
    return [Segment(piece, base.replace(max_tokens=output_budget(piece), seed=seed)) for piece in pieces]
