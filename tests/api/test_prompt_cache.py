"""The prompt cache: a text said again in the same voice and options is served at once, without a
worker, within a memory budget; nothing that would change the prompt is ever served from it."""
from __future__ import annotations

import asyncio

import numpy as np
import pytest
import torch

from api.speech.prompt_cache import MAX_CACHED_CHARS, PromptCache, PromptKey, prompt_bytes
from api.speech.prompt_pool import PromptPool
from api.speech.voice_choice import VoiceChoice
from model.families.base import PromptTooLong, SpeechPrompt
from model.families.cloning import ClonedVoice


def key(text: str = "Hello.", **changes) -> PromptKey:
    fields = dict(text=text, normalize=False, voice="v", speed=1.0, language=None, instructions=None) | changes
    return PromptKey(**fields)


def prompt(frames: int = 10, ids: int = 5) -> SpeechPrompt:
    return SpeechPrompt(token_ids=list(range(ids)), conditioning=torch.zeros(frames, 192))


def test_prompt_bytes_count_the_arrays():
    assert prompt_bytes(prompt(frames=100)) - prompt_bytes(prompt(frames=0)) == 100 * 192 * 4


def test_least_recently_used_prompts_go_first_within_the_budget():
    one = prompt_bytes(prompt())
    cache = PromptCache(max_bytes=2 * one)
    cache.put(key("a"), prompt())
    cache.put(key("b"), prompt())
    assert cache.get(key("a")) is not None  # now b is the least recently used
    cache.put(key("c"), prompt())
    assert cache.get(key("b")) is None and cache.get(key("a")) is not None and cache.get(key("c")) is not None
    assert cache.bytes == 2 * one and len(cache) == 2
    assert (cache.hits, cache.misses) == (3, 1)


def test_a_prompt_larger_than_the_budget_or_still_growing_is_not_kept():
    cache = PromptCache(max_bytes=prompt_bytes(prompt()))
    cache.put(key("big"), prompt(frames=1000))
    live = prompt()
    live.text_complete = False
    cache.put(key("live"), live)
    assert len(cache) == 0 and cache.bytes == 0


def test_no_user_of_a_kept_prompt_can_change_another_users():
    cache = PromptCache(max_bytes=1 << 20)
    original = prompt()
    cache.put(key(), original)
    original.token_ids.append(99)  # the preparing request's own prompt, changed after
    first = cache.get(key())
    first.token_ids.append(42)
    assert cache.get(key()).token_ids == [0, 1, 2, 3, 4]


class CountingFrontend:
    """Prepares `len(text)` token ids, counting calls; refuses over `max_tokens` as front ends do."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def prepare(self, text, voice, speed=1.0, max_tokens=None, *, language=None, instructions=None, clone=None):
        self.calls.append((text, voice, speed, language, instructions, clone is not None))
        if max_tokens is not None and len(text) > max_tokens:
            raise PromptTooLong(len(text), max_tokens)
        if not text.strip():
            raise ValueError("nothing to speak")
        return SpeechPrompt(token_ids=list(range(len(text))))


def submit_all(requests: list[tuple[str, VoiceChoice, float, int | None]], cache: PromptCache | None):
    """Submits each (text, voice, speed, max_tokens) in turn, awaiting it; what each came back as."""
    frontend = CountingFrontend()

    async def main():
        results = []
        async with PromptPool(frontend.prepare, cache=cache) as pool:
            for text, voice, speed, max_tokens in requests:
                future = pool.submit(text, voice, speed, arrival=pool.next_arrival(), index=0, first=True,
                                     max_tokens=max_tokens)
                immediate = future.done()
                try:
                    results.append((immediate, (await future).token_ids))
                except Exception as exc:  # noqa: BLE001 - the refusal is the result here
                    results.append((immediate, type(exc).__name__))
            return results, pool.metrics.registry.get_sample_value("chorus_prompt_cache_hits_total")

    results, hits = asyncio.run(main())
    return results, frontend.calls, hits


def test_a_repeat_is_served_at_once_without_preparing_it_again():
    voice = VoiceChoice("v")
    results, calls, hits = submit_all([("Hello.", voice, 1.0, None)] * 3, PromptCache(1 << 20))
    assert len(calls) == 1 and hits == 2
    assert [immediate for immediate, _ in results] == [False, True, True]
    assert all(ids == list(range(6)) for _, ids in results)


@pytest.mark.parametrize("other", [
    ("Hello!", VoiceChoice("v"), 1.0),
    ("Hello.", VoiceChoice("w"), 1.0),
    ("Hello.", VoiceChoice("v"), 1.5),
    ("Hello.", VoiceChoice("v", language="english"), 1.0),
    ("Hello.", VoiceChoice("v", instructions="Whisper."), 1.0),
    ("Hello.", VoiceChoice("v", normalize=True), 1.0),
])
def test_any_difference_in_text_voice_or_options_is_prepared_anew(other):
    _, calls, hits = submit_all([("Hello.", VoiceChoice("v"), 1.0, None), (*other, None)], PromptCache(1 << 20))
    assert len(calls) == 2 and hits == 0


def test_cloned_voices_long_texts_and_failures_are_never_served_from_the_cache():
    clone = VoiceChoice("voice_1", clone=ClonedVoice("m", "x_vector", {"x": np.zeros(4, np.float32)}))
    long_text = "a" * (MAX_CACHED_CHARS + 1)
    requests = [("Hi.", clone, 1.0, None)] * 2 + [(long_text, VoiceChoice("v"), 1.0, None)] * 2
    requests += [("   ", VoiceChoice("v"), 1.0, None)] * 2
    results, calls, hits = submit_all(requests, PromptCache(1 << 20))
    assert len(calls) == 6 and hits == 0
    assert [r for _, r in results[-2:]] == ["ValueError", "ValueError"]


def test_a_kept_prompt_over_a_requests_token_limit_goes_to_the_front_end():
    results, calls, hits = submit_all([("Hello there.", VoiceChoice("v"), 1.0, None),
                                       ("Hello there.", VoiceChoice("v"), 1.0, 5)], PromptCache(1 << 20))
    assert len(calls) == 2 and hits == 0 and results[1] == (False, "PromptTooLong")


def test_without_a_cache_every_prompt_is_prepared():
    _, calls, hits = submit_all([("Hello.", VoiceChoice("v"), 1.0, None)] * 2, None)
    assert len(calls) == 2 and hits == 0
