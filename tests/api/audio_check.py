"""Decoding helpers for the API tests (PyAV, independent of the server's encoders)."""
from __future__ import annotations

import io
from dataclasses import dataclass

import av
import numpy as np

SAMPLES_PER_FRAME = 2048  # tiny-random's SNAC frame at 24 kHz


@dataclass
class Decoded:
    sample_rate: int
    channels: int
    samples: np.ndarray  # float32, first channel

    @property
    def seconds(self) -> float:
        return self.samples.size / self.sample_rate


def decode(data: bytes, raw_format: str | None = None, sample_rate: int | None = None) -> Decoded:
    """Any container PyAV can probe; a headerless format (e.g. "mulaw") needs its name and rate."""
    options = {"sample_rate": str(sample_rate), "ch_layout": "mono"} if raw_format else {}
    with av.open(io.BytesIO(data), format=raw_format, options=options) as container:
        stream = container.streams.audio[0]
        frames = list(container.decode(stream))
    assert frames, "no audio decoded"
    pcm = np.concatenate([_first_channel(f) for f in frames])
    return Decoded(frames[0].sample_rate, frames[0].layout.nb_channels, pcm)


def pcm16_to_float(data: bytes) -> np.ndarray:
    assert len(data) % 2 == 0, "pcm16 must have an even number of bytes"
    return np.frombuffer(data, dtype="<i2").astype(np.float32) / 32767.0


def _first_channel(frame: av.AudioFrame) -> np.ndarray:
    """Float samples of channel 0 in [-1, 1], whatever the decoder's sample format."""
    data = frame.to_ndarray()
    channels = frame.layout.nb_channels
    first = data.reshape(channels, -1)[0] if frame.format.is_planar else data.reshape(-1)[::channels]
    scale = {"s16": 32768.0, "s32": 2.0**31}.get(frame.format.name.rstrip("p"), 1.0)
    return first.astype(np.float32) / scale
