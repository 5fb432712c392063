"""What the voice-library tests upload: the Qwen3-TTS Base test model's clip, and the containers
that recordings of many channels are made in (benchmarks/hostile_media.py makes them)."""
from __future__ import annotations

import io
import wave
from pathlib import Path

import numpy as np

GOLDEN = Path(__file__).resolve().parents[1] / "model" / "qwen3_tts" / "golden" / "golden.npz"
BASE = "tiny-random-qwen3-base"
TWO_FRAMES = dict(min_audio_seconds=0.1, audio_seconds_per_char=0.01)


def wav_bytes(samples: np.ndarray, rate: int = 24000) -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(rate)
        wav.writeframes((np.clip(samples, -1, 1) * 32767).astype("<i2").tobytes())
    return out.getvalue()


# name: (container, codec, encoder options). Besides WAV: containers that carry more than 8
# channels (as "N channels", in no order; libopus takes up to 254 with mapping family 255).
MANY_CHANNEL_FORMATS = {
    "mka-pcm": ("matroska", "pcm_s16le", {}),
    "caf-pcm": ("caf", "pcm_s16le", {}),
    "aiff-pcm": ("aiff", "pcm_s16be", {}),
    "ogg-opus": ("ogg", "libopus", {"mapping_family": "255"}),
}
# Besides WAV: containers whose 8 channels FFmpeg reads in its own order (7.1) or in none.
EIGHT_CHANNEL_FORMATS = {
    "mka-pcm": ("matroska", "pcm_s16le", {}),
    "flac": ("flac", "flac", {}),
    "ogg-opus": ("ogg", "libopus", {}),
}
# CAF and AIFF carry 7.1 in a custom order, and PyAV 18 frees a custom-order layout twice (its
# AudioLayout copies the layout but not its map, then both free the map): decoding such a file
# corrupts the heap of the process that decodes it.
CUSTOM_ORDER_7_1 = {"caf-pcm": ("caf", "pcm_s16le", {}), "aiff-pcm": ("aiff", "pcm_s16be", {})}
