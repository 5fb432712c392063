"""A codec's incremental steps replayed from CUDA graphs captured at fixed shapes.

A codec that decodes from per-stream state slots (Qwen3-TTS's 12 Hz) feeds each stream the frames
made since its last feed: one a step while its listener is close to running dry, a piece of
INCREMENTAL_PIECE_FRAMES once it is far ahead (engine/audio/decoder.py). On a GPU such a step is a
few frames through dozens of convolutions and an attention per layer: launch-bound. At start-up a
graph is captured for each of the short feed lengths at every padded batch size; a batch of
another shape steps eagerly.
"""
from __future__ import annotations

import bisect
from typing import Sequence

import torch
from torch import Tensor

from engine.graph_capture import capture_grid, captured
from model.codecs.base import SlottedDecoder


class GraphedSlottedDecoder:
    """`decoder` (a SlottedDecoder) whose `step` replays a graph for a batch of B streams fed n
    frames each, for n in `lengths` and B up to the largest of `batch_sizes`.

    Invariant: `step` returns what `decoder.step` returns for the same inputs (the graph runs that
    step over copies of them: rows past B repeat row 0, whose results are dropped); the audio and
    states it returns are views of output buffers every graph shares, valid until the next `step`
    (the streaming decoder scatters the states back to their slots and copies the audio to the
    host before its next feed). With `eager_replay` nothing is captured and a "replay" runs the
    same function over the same buffers: the CPU tests' way through this path.
    """

    def __init__(self, decoder: SlottedDecoder, frame_shape: tuple[int, ...], frame_dtype: torch.dtype,
                 batch_sizes: list[int], lengths: list[int], device: torch.device, eager_replay: bool = False) -> None:
        self.decoder = decoder
        self.delay_samples = decoder.delay_samples
        self.batch_sizes = sorted(batch_sizes)
        self.lengths = sorted(lengths)
        self.eager_replay = eager_replay
        largest = self.batch_sizes[-1]
        self._frames = {n: torch.zeros(largest, n, *frame_shape, dtype=frame_dtype, device=device)
                        for n in self.lengths}
        self._frames_before = torch.zeros(largest, dtype=torch.int64, device=device)
        self._states = [torch.zeros(largest, *shape, dtype=dtype, device=device)
                        for shape, dtype in decoder.state_shapes()]
        self._graphs: dict[tuple[int, int], torch.cuda.CUDAGraph] = {}
        self._outputs: dict[tuple[int, int], tuple[Tensor, list[Tensor]]] = {}
        # What every graph writes its results into (audio per feed length, then the states): the
        # step's own outputs stay inside the graph's pool as scratch. Kept per graph, they would
        # stay allocated once per shape, each state a view holding its layer's whole input.
        self._audio_out: dict[int, Tensor] = {}
        self._states_out: list[Tensor] = []

    # ---- the SlottedDecoder the streaming decoder sees ----------------------------------------

    def state_shapes(self) -> list[tuple[tuple[int, ...], torch.dtype]]:
        return self.decoder.state_shapes()

    def initial_state(self) -> list:
        return self.decoder.initial_state()

    def decode(self, frames: Tensor, states: Sequence[Sequence], frames_before: Sequence[int],
               totals: Sequence[int | None]) -> tuple[Tensor, list[list]]:
        return self.decoder.decode(frames, states, frames_before, totals)

    def step(self, frames: Tensor, frames_before: Tensor, states: Sequence[Tensor]) -> tuple[Tensor, list[Tensor]]:
        rows, n = frames.shape[:2]
        if rows > self.batch_sizes[-1] or n not in self._frames:
            return self.decoder.step(frames, frames_before, states)
        padded = self.batch_sizes[bisect.bisect_left(self.batch_sizes, rows)]
        self._fill(self._frames[n], frames, rows, padded)
        self._fill(self._frames_before, frames_before, rows, padded)
        for buffer, state in zip(self._states, states):
            self._fill(buffer, state, rows, padded)
        if self.eager_replay:
            audio, new = self._run(padded, n)
        else:
            self._graphs[padded, n].replay()
            audio, new = self._outputs[padded, n]
        return audio[:rows], [state[:rows] for state in new]

    # ---- capture ------------------------------------------------------------------------------

    def capture(self) -> None:
        if self.eager_replay:
            return
        self._graphs, self._outputs = capture_grid(self.lengths, self.batch_sizes, self._run)

    def _run(self, size: int, n: int) -> tuple[Tensor, list[Tensor]]:
        audio, states = self.decoder.step(self._frames[n][:size], self._frames_before[:size],
                                          [s[:size] for s in self._states])
        largest = self.batch_sizes[-1]
        if n not in self._audio_out:  # at the eager run before the first capture of this length
            self._audio_out[n] = audio.new_empty(largest, *audio.shape[1:])
        if not self._states_out:
            self._states_out = [state.new_empty(largest, *state.shape[1:]) for state in states]
        self._audio_out[n][:size].copy_(audio)
        for out, state in zip(self._states_out, states):
            out[:size].copy_(state)
        return self._audio_out[n][:size], [out[:size] for out in self._states_out]

    @staticmethod
    def _fill(buffer: Tensor, values: Tensor, rows: int, padded: int) -> None:
        buffer[:rows].copy_(values)
        buffer[rows:padded].copy_(values[:1].expand(padded - rows, *values.shape[1:]))


def capture_state_graphs(decoder: SlottedDecoder, frame_shape: tuple[int, ...], frame_dtype: torch.dtype,
                         batch_sizes: list[int], lengths: list[int], device: torch.device) -> GraphedSlottedDecoder:
    return captured(GraphedSlottedDecoder(decoder, frame_shape, frame_dtype, batch_sizes, lengths, device),
                    "codec step graphs")
