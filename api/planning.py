"""Turns one speech request's text into engine requests that each fit the model's context."""
from __future__ import annotations

import functools

from api.settings import ApiSettings
from api.synthesis import Segment
from api.text_split import split_text
from engine.outputs import EngineLimits
from model.families.base import PromptFrontend, SpeechPrompt, VoiceNotFoundError
from model.sampling import SamplingParams


def plan_segments(
    text: str,
    voice: str,
    frontend: PromptFrontend,
    settings: ApiSettings,
    limits: EngineLimits,
    seed: int | None = None,
    speed: float = 1.0,
) -> list[Segment]:
    """One segment when the whole text fits (prompt + its outputs within the context: known
    exactly when prompt processing fixes the length, else the text's output budget), otherwise
    the fewest sentence-aligned segments that each fit."""
    base: SamplingParams = frontend.default_sampling()

    def output_budget(piece: str) -> int:
        return min(base.max_tokens, settings.max_tokens_for(piece, limits.outputs_per_second))

    @functools.cache  # fits and the filter below ask about the same pieces
    def prepared(piece: str) -> SpeechPrompt | None:
        """The piece's prompt, or None when the front end finds nothing to speak in it."""
        try:
            return frontend.prepare(piece, voice, speed)
        except VoiceNotFoundError:
            raise
        except ValueError:
            return None

    def fits(piece: str) -> bool:
        prompt = prepared(piece)
        if prompt is None:
            return True  # nothing to speak (a lone "..."): it takes no room, and is dropped below
        outputs = frontend.expected_outputs(prompt)
        return len(prompt.token_ids) + (output_budget(piece) if outputs is None else outputs) <= limits.context_tokens

    stripped = text.strip()
    pieces = [stripped] if fits(stripped) else split_text(text, fits)
    spoken = [piece for piece in pieces if prepared(piece) is not None]
    if not spoken:
        raise ValueError(f"nothing to speak in {text!r}")
    return [Segment(piece, base.replace(max_tokens=output_budget(piece), seed=seed), prepared(piece))
            for piece in spoken]
