"""A fixed, seeded corpus of request texts with the length mix of BENCHMARKS.md."""
from __future__ import annotations

import random
from dataclasses import dataclass

from api.config.settings import ApiSettings
from model.families.orpheus.layout import FRAME_TOKENS

# (share of requests, fewest words, most words): short replies, sentences, paragraphs.
LENGTH_MIX = ((0.5, 5, 15), (0.35, 15, 40), (0.15, 60, 150))
_WORDS = (
    "the a one every our this that some morning evening river city window garden engine signal "
    "voice story answer question light shadow music letter street market harbor station train "
    "quiet bright slow quick warm cold green blue early late careful sudden gentle distant "
    "walks sings waits turns opens closes carries follows remembers finds builds crosses listens "
    "returns reads writes and but while because after before under over through near beside "
    "always never often again today tomorrow softly clearly slowly together alone here there"
).split()


@dataclass(slots=True)
class BenchRequest:
    """One request of the workload: its text, voice, and the exact number of audio tokens every
    system must generate for it (a whole number of 7-token frames), or None where the system
    sizes the request from its text, as a server does for any HTTP client."""

    text: str
    voice: str
    max_tokens: int | None = None

    def __post_init__(self) -> None:
        if self.max_tokens is not None and (self.max_tokens < FRAME_TOKENS or self.max_tokens % FRAME_TOKENS):
            raise ValueError(f"max_tokens must be a positive multiple of {FRAME_TOKENS}, got {self.max_tokens}")


@dataclass(slots=True)
class CorpusConfig:
    """How texts become token budgets. Budgets follow the API's rule (`ApiSettings.max_tokens_for`)
    with a smaller time per character and a cap, so a CPU sweep fits in minutes; with random
    weights the model never stops early, so the budget is the request's exact length."""

    seed: int = 0
    audio_seconds_per_char: float = 0.02
    min_audio_seconds: float = 1.0
    max_audio_seconds: float = 6.0
    voice: str = "tara"
    # The benchmarked Orpheus-shaped models emit 7 tokens per 2048-sample frame at 24 kHz (82.03
    # per second, EngineLimits.outputs_per_second); 82 keeps the corpus of earlier results.
    outputs_per_second: float = 82.0

    def __post_init__(self) -> None:
        if not self.max_audio_seconds >= self.min_audio_seconds > 0:
            raise ValueError("need max_audio_seconds >= min_audio_seconds > 0")
        if not self.audio_seconds_per_char > 0:
            raise ValueError("audio_seconds_per_char must be > 0")
        if not self.outputs_per_second > 0:
            raise ValueError(f"outputs_per_second must be > 0, got {self.outputs_per_second}")

    def tokens_for(self, text: str) -> int:
        settings = ApiSettings(audio_seconds_per_char=self.audio_seconds_per_char,
                               min_audio_seconds=self.min_audio_seconds)
        cap = int(self.max_audio_seconds * self.outputs_per_second)
        tokens = min(cap, settings.max_tokens_for(text, self.outputs_per_second))
        return max(FRAME_TOKENS, tokens // FRAME_TOKENS * FRAME_TOKENS)


def build_corpus(count: int, config: CorpusConfig | None = None) -> list[BenchRequest]:
    """`count` requests; the same config always gives the same list."""
    config = config or CorpusConfig()
    rng = random.Random(config.seed)
    shares = [share for share, _, _ in LENGTH_MIX]
    requests = []
    for _ in range(count):
        _, fewest, most = rng.choices(LENGTH_MIX, weights=shares)[0]
        words = [rng.choice(_WORDS) for _ in range(rng.randint(fewest, most))]
        text = " ".join(words).capitalize() + "."
        requests.append(BenchRequest(text, config.voice, config.tokens_for(text)))
    return requests
