"""Shared by the streaming-decode tests: push frames through a StreamingDecoder as an engine
would, and compare what came out with the whole-utterance decode."""
from __future__ import annotations

import numpy as np
import torch

from capacity.listener import Listener
from engine.audio.decoder import StreamingDecoder
from model.codecs.base import FrameCodec

PARITY = 1e-4
# Measured over 15 eval sentences: at most 1.8e-3 (median 7e-4) with first_lookahead_frames 8.
FIRST_CHUNK_SEAM = 3e-3


def stream_through(decoder: StreamingDecoder, latents: list[torch.Tensor], frames_per_step: int,
                   speed: float = 2.0) -> dict[int, list[np.ndarray]]:
    """Each latent's PCM chunks, its frames pushed `frames_per_step` at a time, all streams each
    step, each finished with its last frames; the decoder is left with no stream open. Steps come
    `speed` times faster than real time on a clock of their own, and each stream's listener hears
    its chunks as they leave (what the engine's request table does)."""
    codec = decoder.codec
    step_seconds = frames_per_step * codec.samples_per_frame / codec.sample_rate / speed
    listeners = {i: Listener(codec.sample_rate) for i in range(len(latents))}
    pieces: dict[int, list[np.ndarray]] = {i: [] for i in range(len(latents))}
    for i in pieces:
        decoder.open(i, listeners[i])
    now = 0.0
    for step in range(0, max(len(z) for z in latents), frames_per_step):
        for i, z in enumerate(latents):
            if step < len(z):
                decoder.push(i, z[step : step + frames_per_step])
                if step + frames_per_step >= len(z):
                    decoder.finish(i)
        now += step_seconds
        for i, chunk in decoder.decode_ready(now).items():
            listeners[i].received(len(chunk.pcm), now)
            pieces[i].append(chunk.pcm)
    assert decoder.num_streams == 0
    return pieces


def assert_equals_whole_decode(codec: FrameCodec, latents: list[torch.Tensor], pieces: dict[int, list[np.ndarray]],
                               first_chunk_frames: int) -> None:
    """Every stream's audio is the whole decode's: within PARITY after its first chunk, within
    FIRST_CHUNK_SEAM in it (its shorter lookahead)."""
    first = first_chunk_frames * codec.samples_per_frame
    for i, z in enumerate(latents):
        whole = codec.decode(z[None])[0].numpy()
        streamed = np.concatenate(pieces[i])
        assert streamed.shape == whole.shape
        assert np.abs(streamed[:first] - whole[:first]).max() < FIRST_CHUNK_SEAM
        assert np.abs(streamed[first:] - whole[first:]).max() < PARITY
