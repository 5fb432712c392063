"""Speaking-rate change without a pitch change: FFmpeg's `atempo` filter, streamed through PyAV."""
from __future__ import annotations

from fractions import Fraction

import av
import numpy as np

from api.speech.audio.frames import to_frame, to_pcm

# atempo's documented range for one instance; wider factors are a chain of instances.
ATEMPO_MIN, ATEMPO_MAX = 0.5, 2.0


def atempo_factors(speed: float) -> list[float]:
    """Splits `speed` into factors inside atempo's range whose product is `speed`."""
    if not speed > 0:
        raise ValueError(f"speed must be > 0, got {speed}")
    factors: list[float] = []
    while speed > ATEMPO_MAX:
        factors.append(ATEMPO_MAX)
        speed /= ATEMPO_MAX
    while speed < ATEMPO_MIN:
        factors.append(ATEMPO_MIN)
        speed /= ATEMPO_MIN
    factors.append(speed)
    return factors


class TempoStretcher:
    """Plays one mono stream `speed` times faster (WSOLA time-stretch), pitch unchanged. Invariant:
    samples come out in order, and after `flush` the output lasts the input's duration / speed
    (within the filter's few-millisecond granularity). speed 1 passes samples through untouched."""

    def __init__(self, sample_rate: int, speed: float) -> None:
        self.sample_rate = sample_rate
        self._pts = 0
        self._graph = self._source = self._sink = None
        if speed == 1.0:
            return
        # NOTE: the graph owns the filter contexts; it must live as long as they are used.
        self._graph = graph = av.filter.Graph()
        self._source = graph.add_abuffer(
            format="flt", sample_rate=sample_rate, layout="mono", time_base=Fraction(1, sample_rate)
        )
        previous = self._source
        for factor in atempo_factors(speed):
            stage = graph.add("atempo", f"{factor:.6f}")
            previous.link_to(stage)
            previous = stage
        self._sink = graph.add("abuffersink")
        previous.link_to(self._sink)
        graph.configure()

    def process(self, pcm: np.ndarray) -> np.ndarray:
        if self._source is None or pcm.size == 0:
            return pcm.astype(np.float32, copy=False)
        self._source.push(to_frame(pcm, self.sample_rate, self._pts))
        self._pts += pcm.size
        return self._drain()

    def flush(self) -> np.ndarray:
        if self._source is None:
            return np.zeros(0, dtype=np.float32)
        self._source.push(None)
        return self._drain()

    def _drain(self) -> np.ndarray:
        frames = []
        while True:
            try:
                frames.append(self._sink.pull())
            except (av.BlockingIOError, av.EOFError):
                return to_pcm(frames)
