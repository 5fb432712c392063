"""Prompts of texts said again: a voice agent's greetings and fillers ("One moment, please.")
repeat all day, and preparing one is the API process's costliest step (joe: espeak, the
teacher's encoder and durations, tens of milliseconds on a worker). A repeat is served from here
at once, without a worker, so it neither waits behind other speeches' preparations nor adds to
them."""
from __future__ import annotations

import copy
from collections import OrderedDict
from dataclasses import dataclass, fields

import numpy as np
import torch

from model.families.base import SpeechPrompt

# Texts this long at most are kept: what repeats is short (a greeting, a filler, a confirmation),
# and a long text's prompt is large (joe: ~66 KB a second of speech) and rarely said again.
MAX_CACHED_CHARS = 200
# Bookkeeping per entry besides its arrays and ids: the key's text, the dataclass, the words.
_ENTRY_OVERHEAD_BYTES = 512
_BYTES_PER_TOKEN_ID = 36  # a Python int in a list
_BYTES_PER_WORD = 160  # a SpokenWord: its text and two floats


@dataclass(frozen=True, slots=True)
class PromptKey:
    """Everything `prepare` reads besides the token limit: two equal keys make the same prompt
    (front ends are deterministic functions of these). A cloned voice is never a key: its clone
    lives only as long as its library entry, and its id could come back with other audio."""

    text: str
    normalize: bool
    voice: str
    speed: float
    language: str | None
    instructions: str | None


def prompt_bytes(prompt: SpeechPrompt) -> int:
    """About what keeping `prompt` costs: its arrays' bytes, its ids and words, and overhead."""
    size = _ENTRY_OVERHEAD_BYTES + _BYTES_PER_TOKEN_ID * len(prompt.token_ids)
    size += _BYTES_PER_WORD * len(prompt.words)
    for field in fields(prompt):
        value = getattr(prompt, field.name)
        if isinstance(value, torch.Tensor):
            size += value.element_size() * value.nelement()
        elif isinstance(value, np.ndarray):
            size += value.nbytes
    return size


class PromptCache:
    """Prepared prompts by key, least recently used dropped first. Invariants: `bytes` is the sum
    of the entries' `prompt_bytes` and never above `max_bytes` (a prompt larger than that is
    not kept); `get` hands out a copy whose token id list is its own (the arrays are shared and
    never written after preparation), so no user of one can change another's prompt; only
    complete prompts are kept (live text grows while it speaks)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self.hits = 0
        self.misses = 0
        self._entries: OrderedDict[PromptKey, tuple[SpeechPrompt, int]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: PromptKey) -> SpeechPrompt | None:
        entry = self._entries.get(key)
        if entry is None:
            self.misses += 1
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        prompt = copy.copy(entry[0])
        prompt.token_ids = list(prompt.token_ids)
        return prompt

    def put(self, key: PromptKey, prompt: SpeechPrompt) -> None:
        size = prompt_bytes(prompt)
        if size > self.max_bytes or not prompt.text_complete:
            return
        old = self._entries.pop(key, None)
        if old is not None:
            self.bytes -= old[1]
        kept = copy.copy(prompt)  # the caller's own prompt stays the caller's
        kept.token_ids = list(prompt.token_ids)
        self._entries[key] = (kept, size)
        self.bytes += size
        while self.bytes > self.max_bytes:
            _, (_, dropped) = self._entries.popitem(last=False)
            self.bytes -= dropped
