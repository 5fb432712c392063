"""Codec window graphs (engine/audio/graphs.py) on the CPU: the same buffers and dispatch as on
CUDA, with every "replay" run eagerly (WindowGraphs(eager_replay=True)) through the tiny SNAC."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import Tensor

from capacity.config import CapacityConfig
from engine.audio.config import StreamingConfig
from engine.audio.decoder import StreamingDecoder
from engine.audio.graphs import WindowGraphs, steady_window_lengths
from model.codecs.base import FrameCodec, WindowHints
from model.families.joe.codec import JoeFrameCodec

CONFIG = StreamingConfig(first_chunk_frames=1, chunk_frames=4, grow_chunks=False, left_context_frames=3,
                         lookahead_frames=2, first_lookahead_frames=2, crossfade_samples=0)
CAPACITY = CapacityConfig(urgent_slack_seconds=0, defer_slack_seconds=math.inf)


def own(hints: WindowHints) -> tuple[StreamingConfig, CapacityConfig]:
    """The configs a codec with `hints` streams with when nothing is set."""
    return StreamingConfig().resolve(hints), CapacityConfig().resolve(hints.urgent_slack_seconds,
                                                                      hints.defer_slack_seconds)


def frames(batch: int, n: int, seed: int) -> Tensor:
    return torch.randint(0, 1024, (batch, n, 7), generator=torch.Generator().manual_seed(seed))


def test_steady_lengths_cover_the_first_and_the_full_context_chunks():
    assert steady_window_lengths(CONFIG, CAPACITY) == [1 + 2, 3 + 4 + 2]
    # SNAC's own: urgent single frames too.
    assert steady_window_lengths(*own(WindowHints())) == [3, 3 + 1 + 2, 3 + 4 + 2]
    # joe: 8, 8, 16, 32, 64, 128-frame chunks with 10 frames of context each side (8 after the first).
    assert steady_window_lengths(*own(JoeFrameCodec.window_hints)) == [16, 28, 36, 52, 84, 148]


@pytest.mark.parametrize("batch", [1, 3, 4])
def test_padded_replays_equal_the_eager_decode(codec, batch):
    graphs = WindowGraphs(codec, [1, 2, 4], [3, 9], torch.device("cpu"), eager_replay=True)
    x = frames(batch, 9, seed=batch)
    assert graphs.can_run(x)
    torch.testing.assert_close(graphs.run(x), codec.decode(x), rtol=0, atol=1e-6)


def test_other_shapes_are_left_to_the_eager_path(codec):
    graphs = WindowGraphs(codec, [1, 2, 4], [3, 9], torch.device("cpu"), eager_replay=True)
    assert not graphs.can_run(frames(1, 5, 0))  # a length without a graph
    assert not graphs.can_run(frames(5, 9, 0))  # more rows than the largest graph


class GraphRunner:
    """CudaStreamRunner's dispatch without a device stream: graphs for the shapes they hold."""

    def __init__(self, graphs: WindowGraphs) -> None:
        self.graphs = graphs
        self.replays = self.eager = 0

    def decode(self, codec: FrameCodec, batch: Tensor) -> Tensor:
        if self.graphs.can_run(batch):
            self.replays += 1
            return self.graphs.run(batch)
        self.eager += 1
        return codec.decode_trusted(batch)

    def to_host(self, audio: Tensor) -> np.ndarray:
        return audio.float().cpu().numpy()


def test_streams_get_the_same_audio_through_window_graphs(codec):
    lengths = {"a": 23, "b": 17, "c": 30}
    runner = GraphRunner(WindowGraphs(codec, [1, 2, 4], steady_window_lengths(CONFIG, CAPACITY), torch.device("cpu"),
                                      eager_replay=True))
    results = []
    for use_graphs in (False, True):
        decoder = StreamingDecoder(codec, CONFIG, capacity=CAPACITY)
        audio = {sid: [] for sid in lengths}
        for sid in lengths:
            decoder.open(sid)
        for step in range(max(lengths.values()) + 1):
            for index, (sid, n) in enumerate(lengths.items()):
                if step < n:
                    decoder.push(sid, frames(1, 1, seed=100 * index + step)[0])
                elif step == n:
                    decoder.finish(sid)
            # Fixed chunking: the moment of the launch changes nothing.
            for sid, chunk in decoder.collect(decoder.launch(runner if use_graphs else None, now=0.0)).items():
                audio[sid].append(chunk.pcm)
        results.append({sid: np.concatenate(a) for sid, a in audio.items()})
    plain, graphed = results
    assert runner.replays > runner.eager > 0
    for sid in lengths:
        np.testing.assert_allclose(graphed[sid], plain[sid], rtol=0, atol=1e-6)
