"""Recordings an attacker (or an odd device) uploads as a voice's clip, made on the spot: any
channel count in WAV written byte by byte (plain or WAVE_FORMAT_EXTENSIBLE, 16-bit or float), and
PyAV's encoders in other containers. Shared by the hostile-surface benchmark
(benchmarks/hostile_surfaces.py) and the voice-upload tests."""
from __future__ import annotations

import io
import struct

import av
import numpy as np

# WAVE_FORMAT_EXTENSIBLE's channel mask for 7.1 (FL FR FC LFE BL BR SL SR), and its sub-format
# GUIDs' common tail.
MASK_7_1 = 0x63F
GUID_TAIL = b"\x00\x00\x00\x00\x10\x00\x80\x00\x00\xaa\x00\x38\x9b\x71"


def channels_of(count: int, seconds: float, rate: int) -> np.ndarray:
    """(count, samples) float32: a vowel-like tone at a level and pitch of its own in each channel,
    so a wrong mix or a channel lost shows in the mean."""
    t = np.arange(round(seconds * rate)) / rate
    rows = [0.4 * (c + 1) / count * np.sin(2 * np.pi * (110 + 20 * c) * t) * (0.6 + 0.4 * np.sin(2 * np.pi * 3 * t))
            for c in range(count)]
    return np.asarray(rows, np.float32)


def wav_of(channels: np.ndarray, rate: int, *, extensible: bool = False, float32: bool = False) -> bytes:
    """A WAV written byte by byte (the `wave` module writes 16-bit WAVE_FORMAT_PCM only):
    16-bit or float samples, as WAVE_FORMAT_EXTENSIBLE (with the 7.1 mask for 8 channels, none
    beyond) when asked. Any channel count up to 65535 (FFmpeg reads at most 512)."""
    count = len(channels)
    data = (channels.T.astype("<f4") if float32 else (np.clip(channels.T, -1, 1) * 32767).astype("<i2")).tobytes()
    width = 4 if float32 else 2
    tag = 3 if float32 else 1
    fmt = struct.pack("<HHIIHH", 0xFFFE if extensible else tag, count, rate, rate * count * width, count * width,
                      8 * width)
    if extensible:
        mask = MASK_7_1 if count == 8 else 0
        fmt += struct.pack("<HHI", 22, 8 * width, mask) + struct.pack("<H", tag) + GUID_TAIL
    chunks = b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", len(data)) + data
    return b"RIFF" + struct.pack("<I", 4 + len(chunks)) + b"WAVE" + chunks


def encoded(container: str, codec: str, channels: np.ndarray, rate: int, options: dict | None = None) -> bytes:
    """`channels` encoded by PyAV, fed as packed 16-bit or float frames of 960 samples (a planar
    frame of 8 or more planes is what crashes PyAV)."""
    count = len(channels)
    layout = "7.1" if count == 8 else f"{count} channels"
    buffer = io.BytesIO()
    with av.open(buffer, "w", format=container) as out:
        stream = out.add_stream(codec, rate=rate, layout=layout, options=options or {})
        packed = np.ascontiguousarray(channels.T)
        for start in range(0, packed.shape[0], 960):
            block = packed[start:start + 960]
            frame = av.AudioFrame.from_ndarray((np.clip(block, -1, 1) * 32767).astype(np.int16).reshape(1, -1),
                                               format="s16", layout=layout)
            frame.sample_rate, frame.pts = rate, start
            out.mux(stream.encode(frame))
        out.mux(stream.encode(None))
    return buffer.getvalue()
