"""Streaming decode against offline decode of all frames at once.

Measured on the tiny SNAC codec (noise off, output std ≈ 0.1); its decoder's receptive field
reaches ≈ 5,050 samples (≈ 2.5 frames) each way, so:
- left context 3 and lookahead 3 frames: streamed audio equals offline within 1e-5 (max 4e-7);
- lookahead 2 (SNAC's own, `WindowHints`): max error 1.5e-3, asserted < 5e-3;
- lookahead 1: max error 0.07-0.11 in the last frame of each chunk and the
  crossfade after it, mean 1.3e-3; every sample farther than 2 frames before a seam or past its
  crossfade is exact (< 1e-5), and the mean error is asserted < 4e-3.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import Tensor
from torch.nn import functional as F

from capacity.config import CapacityConfig
from capacity.listener import Listener
from engine.audio.config import StreamingConfig
from engine.audio.decoder import StreamChunk, StreamingDecoder
from model.codecs.base import FrameCodec

SPF = 2048
EXACT = 1e-5


# Fixed chunking: no listener is ever urgent, no window waits for a later launch.
FIXED_CAPACITY = CapacityConfig(urgent_slack_seconds=0, defer_slack_seconds=math.inf)
NOW = 0.0  # with fixed chunking, the moment a launch happens at changes nothing


def fixed_decoder(codec: FrameCodec, **fields) -> StreamingDecoder:
    """A decoder with fixed chunking and the codec's own values for every field not given."""
    return StreamingDecoder(codec, StreamingConfig(**fields).resolve(codec.window_hints), capacity=FIXED_CAPACITY)


def emit(decoder: StreamingDecoder, listeners: dict[str, Listener], now: float, runner=None) -> dict[str, StreamChunk]:
    """Launches and collects the windows ready at `now`, and tells each stream's listener that its
    audio left then, as the engine's request table does (the decoder only reads listeners)."""
    chunks = decoder.collect(decoder.launch(runner, now=now))
    for sid, chunk in chunks.items():
        listeners[sid].received(len(chunk.pcm), now)
    return chunks


class CountingCodec(FrameCodec):
    """Forwards to another codec and records the batch shape of every decode call."""

    def __init__(self, inner: FrameCodec) -> None:
        self.inner = inner
        self.sample_rate, self.samples_per_frame = inner.sample_rate, inner.samples_per_frame
        self.frame_shape, self.frame_dtype = inner.frame_shape, inner.frame_dtype
        self.calls: list[tuple[int, int]] = []

    def check_frames(self, frames: Tensor, leading_dims: int) -> None:
        self.inner.check_frames(frames, leading_dims)

    def decode(self, frames: Tensor) -> Tensor:
        self.calls.append(tuple(frames.shape[:2]))
        return self.inner.decode(frames)


class BoxBlurCodec(FrameCodec):
    """A smooth non-causal codec over latent-vector frames: each frame's mean held for 64
    samples, then averaged over 193 samples (zero-padded), so audio is continuous and a window
    edge less than 1.5 frames away bends the signal measurably."""

    sample_rate = 8000
    samples_per_frame = 64
    frame_shape = (3,)
    frame_dtype = torch.float32

    def decode(self, frames: Tensor) -> Tensor:
        held = frames.mean(-1).repeat_interleave(self.samples_per_frame, dim=-1)[:, None]
        width = 3 * self.samples_per_frame + 1
        kernel = torch.full((1, 1, width), 1 / width)
        return F.conv1d(held, kernel, padding=width // 2)[:, 0]


def random_frames(n: int, seed: int) -> Tensor:
    return torch.randint(0, 1024, (n, 7), generator=torch.Generator().manual_seed(seed))


def stream_all(
    decoder: StreamingDecoder, frames: dict[str, Tensor], bursts: dict[str, list[int]]
) -> dict[str, list[StreamChunk]]:
    """Opens every stream, pushes them interleaved (stream s pushes bursts[s] frames in turn,
    then finishes), calling decode_ready after each round; returns each stream's chunks."""
    chunks: dict[str, list[StreamChunk]] = {sid: [] for sid in frames}
    sent = dict.fromkeys(frames, 0)
    for sid in frames:
        decoder.open(sid)
    turn = 0
    while any(sent[sid] <= len(f) for sid, f in frames.items()):
        for sid, f in frames.items():
            if sent[sid] < len(f):
                burst = f[sent[sid] : sent[sid] + bursts[sid][turn % len(bursts[sid])]]
                decoder.push(sid, burst)
                sent[sid] += len(burst)
            elif sent[sid] == len(f):
                decoder.finish(sid)
                sent[sid] += 1
        for sid, chunk in decoder.decode_ready(NOW).items():
            chunks[sid].append(chunk)
        turn += 1
    return chunks


def joined(chunks: list[StreamChunk], n_frames: int, spf: int = SPF) -> np.ndarray:
    assert [c.is_last for c in chunks] == [False] * (len(chunks) - 1) + [True]
    assert chunks[0].frame_start == 0 and chunks[-1].frame_end == n_frames
    for before, after in zip(chunks, chunks[1:]):
        assert after.frame_start == before.frame_end
    for chunk in chunks:
        assert chunk.pcm.dtype == np.float32
        assert chunk.pcm.shape == ((chunk.frame_end - chunk.frame_start) * spf,)
    return np.concatenate([c.pcm for c in chunks])


def offline(codec: FrameCodec, frames: Tensor) -> np.ndarray:
    return codec.decode(frames[None])[0].numpy()


def seams(chunks: list[StreamChunk], spf: int = SPF) -> list[int]:
    return [c.frame_start * spf for c in chunks[1:] if c.pcm.size]


STREAMS = {"a": random_frames(10, 1), "b": random_frames(5, 2), "c": random_frames(8, 3)}
BURSTS = {"a": [1], "b": [2, 1, 3], "c": [4, 1]}


@pytest.mark.parametrize("lookahead, tolerance", [(3, EXACT), (2, 5e-3)])
def test_interleaved_streams_match_offline_decode(codec, lookahead, tolerance):
    decoder = fixed_decoder(codec, lookahead_frames=lookahead)
    chunks = stream_all(decoder, STREAMS, BURSTS)
    for sid, frames in STREAMS.items():
        audio = joined(chunks[sid], len(frames))
        assert len(audio) == len(frames) * SPF
        np.testing.assert_allclose(audio, offline(codec, frames), rtol=0, atol=tolerance)
    assert decoder.num_streams == 0


def test_one_frame_lookahead_error_stays_at_seams(codec):
    decoder = fixed_decoder(codec, lookahead_frames=1)
    chunks = stream_all(decoder, STREAMS, BURSTS)
    for sid, frames in STREAMS.items():
        error = np.abs(joined(chunks[sid], len(frames)) - offline(codec, frames))
        assert error.mean() < 4e-3
        near_seam = np.zeros_like(error, dtype=bool)
        for seam in seams(chunks[sid]):
            near_seam[max(0, seam - 2 * SPF) : seam + decoder.config.crossfade_samples] = True
        assert error[~near_seam].max() < EXACT


def test_first_chunk_needs_first_chunk_frames_plus_lookahead(codec):
    decoder = fixed_decoder(codec, first_chunk_frames=2, chunk_frames=3, lookahead_frames=1)
    decoder.open("s")
    ready_after: list[tuple[int, tuple[int, int]]] = []
    for i, frame in enumerate(random_frames(9, 4), start=1):
        decoder.push("s", frame[None])
        ready_after += [(i, (c.frame_start, c.frame_end)) for c in decoder.decode_ready(NOW).values()]
    # First audio once 2 + 1 frames exist; then every 3 new frames (+ 1 of lookahead).
    assert ready_after == [(3, (0, 2)), (6, (2, 5)), (9, (5, 8))]
    assert decoder.pending_frames == 1


def test_burst_emits_every_whole_chunk_at_once(codec):
    decoder = fixed_decoder(codec, chunk_frames=2, lookahead_frames=1)
    decoder.open("s")
    decoder.push("s", random_frames(1 + 1 + 7, 5))
    chunk = decoder.decode_ready(NOW)["s"]
    assert (chunk.frame_start, chunk.frame_end) == (0, 8)  # first chunk: every ready frame
    decoder.push("s", random_frames(5, 6))
    chunk = decoder.decode_ready(NOW)["s"]
    assert (chunk.frame_start, chunk.frame_end) == (8, 12)  # two chunks of 2; 1 short + lookahead


def test_batched_windows_equal_streams_decoded_alone(codec):
    streams = {sid: random_frames(7, seed) for seed, sid in enumerate("xyz")}
    bursts = {sid: [1] for sid in streams}
    counting = CountingCodec(codec)
    together = stream_all(fixed_decoder(counting), streams, bursts)
    # Equal pushes give equal windows: one decode call per round, holding all three streams.
    assert counting.calls and all(batch == 3 for batch, _ in counting.calls)
    for sid, frames in streams.items():
        alone = stream_all(fixed_decoder(codec), {sid: frames}, bursts)[sid]
        assert len(alone) == len(together[sid])
        for a, b in zip(alone, together[sid]):
            assert (a.frame_start, a.frame_end) == (b.frame_start, b.frame_end)
            assert a.is_last == b.is_last
            np.testing.assert_allclose(a.pcm, b.pcm, rtol=0, atol=1e-6)


def test_tiny_codec_seams_jump_no_more_than_the_offline_audio(codec):
    decoder = fixed_decoder(codec)
    chunks = stream_all(decoder, STREAMS, BURSTS)
    for sid, frames in STREAMS.items():
        audio, reference = joined(chunks[sid], len(frames)), offline(codec, frames)
        jumps, reference_jumps = np.abs(np.diff(audio)), np.abs(np.diff(reference))
        for seam in seams(chunks[sid]):
            assert jumps[seam - 1] <= reference_jumps.max()
            # Measured ≤ 0.045 (the audio's own jumps reach 0.9).
            assert abs(jumps[seam - 1] - reference_jumps[seam - 1]) < 0.1


@pytest.mark.parametrize("crossfade", [32, 0])
def test_crossfade_removes_the_seam_step(crossfade):
    codec = BoxBlurCodec()
    frames = {"s": torch.rand(20, 3, generator=torch.Generator().manual_seed(0)) * 2 - 1}
    decoder = fixed_decoder(codec, chunk_frames=3, lookahead_frames=1, crossfade_samples=crossfade)
    chunks = stream_all(decoder, frames, {"s": [1]})["s"]
    audio = joined(chunks, 20, spf=codec.samples_per_frame)
    jumps = np.abs(np.diff(audio))
    at_seams = np.array([jumps[seam - 1] for seam in seams(chunks, codec.samples_per_frame)])
    elsewhere = np.delete(jumps, [seam - 1 for seam in seams(chunks, codec.samples_per_frame)])
    if crossfade:
        assert at_seams.max() <= 1.5 * elsewhere.max()
    else:  # the control: without a crossfade the window edge shows as a step
        assert at_seams.max() > 3 * elsewhere.max()


def test_finish_flushes_the_rest_without_lookahead(codec):
    decoder = fixed_decoder(codec, lookahead_frames=2)
    frames = random_frames(4, 7)
    decoder.open("s")
    decoder.push("s", frames)
    first = decoder.decode_ready(NOW)["s"]
    assert (first.frame_start, first.frame_end, first.is_last) == (0, 2, False)
    decoder.finish("s")
    with pytest.raises(ValueError, match="finished"):
        decoder.push("s", frames[:1])
    last = decoder.decode_ready(NOW)["s"]
    assert (last.frame_start, last.frame_end, last.is_last) == (2, 4, True)
    assert decoder.num_streams == 0 and decoder.decode_ready(NOW) == {}
    np.testing.assert_allclose(
        np.concatenate([first.pcm, last.pcm]), offline(codec, frames), rtol=0, atol=5e-3
    )


def test_finish_with_nothing_left_gives_an_empty_last_chunk(codec):
    decoder = fixed_decoder(codec, lookahead_frames=0, crossfade_samples=0)
    decoder.open("s")
    decoder.push("s", random_frames(2, 8))
    assert decoder.decode_ready(NOW)["s"].frame_end == 2
    decoder.finish("s")
    last = decoder.decode_ready(NOW)["s"]
    assert last.is_last and last.pcm.size == 0 and (last.frame_start, last.frame_end) == (2, 2)
    assert decoder.num_streams == 0


def test_empty_stream_ends_with_one_empty_chunk(codec):
    counting = CountingCodec(codec)
    decoder = fixed_decoder(counting)
    decoder.open("s")
    assert decoder.decode_ready(NOW) == {}
    decoder.finish("s")
    chunk = decoder.decode_ready(NOW)["s"]
    assert chunk.is_last and chunk.pcm.size == 0 and chunk.pcm.dtype == np.float32
    assert (chunk.frame_start, chunk.frame_end) == (0, 0) and counting.calls == []
    assert decoder.num_streams == 0


def test_discard_forgets_a_stream(codec):
    decoder = fixed_decoder(codec)
    decoder.open("gone")
    decoder.open("kept")
    decoder.push("gone", random_frames(3, 9))
    decoder.push("kept", random_frames(3, 10))
    assert decoder.pending_frames == 6
    decoder.discard("gone")
    decoder.discard("never-opened")
    assert decoder.num_streams == 1 and decoder.pending_frames == 3
    assert list(decoder.decode_ready(NOW)) == ["kept"]
    with pytest.raises(KeyError):
        decoder.push("gone", random_frames(1, 11))
    decoder.open("gone")  # the id is free again


def test_misuse_is_refused(codec):
    decoder = fixed_decoder(codec)
    decoder.open("s")
    with pytest.raises(ValueError, match="already open"):
        decoder.open("s")
    with pytest.raises(ValueError, match="frames must be"):
        decoder.push("s", torch.zeros(2, 6, dtype=torch.long))
    with pytest.raises(ValueError, match=r"\[0, 1024\)"):
        decoder.push("s", torch.full((1, 7), 4096))
    assert decoder.pending_frames == 0
    with pytest.raises(ValueError, match="exceeds one frame"):
        fixed_decoder(codec, crossfade_samples=SPF + 1)
    with pytest.raises(ValueError, match="resolve"):
        StreamingDecoder(codec, StreamingConfig(chunk_frames=2))


def test_a_stream_about_to_run_dry_gets_one_frame_chunks(codec):
    """Chunks wait for chunk_frames while the listener has audio to spare; when the emitted audio
    would run out within urgent_slack_seconds, each ready frame leaves at once."""
    config = StreamingConfig(first_chunk_frames=1, chunk_frames=4, lookahead_frames=1)
    decoder = StreamingDecoder(codec, config.resolve(codec.window_hints), capacity=CapacityConfig(urgent_slack_seconds=0.05))
    frame_s = SPF / codec.sample_rate  # 85 ms
    listeners = {"s": Listener(codec.sample_rate)}
    decoder.open("s", listeners["s"])
    decoder.push("s", random_frames(2, seed=3))
    first = emit(decoder, listeners, 0.0)["s"]
    assert (first.frame_start, first.frame_end) == (0, 1)  # playback of 1 frame starts at t=0
    decoder.push("s", random_frames(3, seed=4))  # 3 frames ready (+1 lookahead), fewer than 4
    assert emit(decoder, listeners, 0.0) == {}  # 85 ms of slack: wait for 4
    chunk = emit(decoder, listeners, frame_s - 0.04)["s"]  # 40 ms left: go now
    assert (chunk.frame_start, chunk.frame_end) == (1, 4)
    # A listener that has already run dry is stalled anyway: back to efficient 4-frame chunks.
    decoder.push("s", random_frames(3, seed=5))
    assert emit(decoder, listeners, 10.0) == {}


def test_growing_chunks_double_up_to_chunk_frames(codec):
    decoder = fixed_decoder(codec, first_chunk_frames=2, chunk_frames=8, grow_chunks=True, lookahead_frames=1)
    decoder.open("s")
    spans = []
    for seed in range(40):
        decoder.push("s", random_frames(1, seed=seed))
        for chunk in decoder.decode_ready(NOW).values():
            spans.append((chunk.frame_start, chunk.frame_end))
    # 40 frames with 1 of lookahead: the next chunk (8 more) would need 41.
    assert spans == [(0, 2), (2, 4), (4, 8), (8, 16), (16, 24), (24, 32)]
