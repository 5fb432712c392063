"""Orpheus's front end counts a prompt's tokens against `max_tokens` before it hands one out."""
from __future__ import annotations

import pytest

from model.config import ModelConfig
from model.families.base import PromptTooLong
from model.loader import load_frontend
from model.tiny_random import ensure_tiny_random


def test_a_prompt_over_max_tokens_is_refused(chorus_cache):
    frontend = load_frontend(ModelConfig(model=str(ensure_tiny_random())))
    voice = frontend.voices[0]
    exact = len(frontend.prepare("Hello there, how are you?", voice).token_ids)
    assert len(frontend.prepare("Hello there, how are you?", voice, max_tokens=exact).token_ids) == exact
    with pytest.raises(PromptTooLong) as refused:
        frontend.prepare("Hello there, how are you?", voice, max_tokens=exact - 1)
    assert (refused.value.tokens, refused.value.limit) == (exact, exact - 1)
