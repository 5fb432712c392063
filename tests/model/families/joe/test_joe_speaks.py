"""The shipped voice honours `speed` through its duration model (what it says, end to end, is
long/test_joe_speaks.py's; `chorus serve` with no flags, live/test_joe_speaks.py's)."""
from __future__ import annotations

import pytest

from benchmarks.asr import normalize_words
from tests.voice_packages import require_voice_packages

require_voice_packages()

from model.families.joe.prompt import JoePromptFrontend  # noqa: E402
from model.families.joe.student import SHIPPED_WEIGHTS, read_config  # noqa: E402

# Not eval sentences. Pooled over their 42 words, pocketsphinx's recall measured 0.71 for the
# shipped voice (iSTFT decoder) and 0.76 with the HiFi-GAN decoder; noise scores ~0. One
# sentence alone swings by 0.2 between decoders that the eval set scores alike.
SPOKEN = (
    "Your order has shipped and should arrive on Thursday afternoon.",
    "Please hold the line while I check your account.",
    "The meeting has been moved to ten thirty tomorrow morning.",
    "Thank you for calling, is there anything else I can help with today?",
)


def word_recall(reference: str, transcript: str) -> float:
    """Share of the reference's words that the transcript contains (in any order)."""
    heard = normalize_words(transcript)
    words = normalize_words(reference)
    return sum(1 for w in words if w in heard) / len(words)


def test_speed_is_the_duration_models_rate():
    frontend = JoePromptFrontend(read_config(SHIPPED_WEIGHTS))
    normal = frontend.prepare(SPOKEN[0], "joe").num_frames
    fast = frontend.prepare(SPOKEN[0], "joe", speed=1.5).num_frames
    slow = frontend.prepare(SPOKEN[0], "joe", speed=0.75).num_frames
    assert fast / normal == pytest.approx(1 / 1.5, rel=0.02)
    assert slow / normal == pytest.approx(1 / 0.75, rel=0.02)

