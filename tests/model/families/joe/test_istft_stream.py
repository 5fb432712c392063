"""joe's iSTFT decoder decoded incrementally: each frame once, and the same audio as a whole decode.

Measured on teacher z (audio peak ~0.5): PyTorch and onnxruntime both within 4e-5 of the whole
decode for any split into pieces (asserted < 1e-4). Through the engine's streaming decoder only
the first chunk (decoded as a window, with its shorter lookahead) differs, as with windows.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.voice_packages import require_voice_packages

require_voice_packages()

from capacity.config import CapacityConfig
from capacity.listener import Listener
from engine.audio.config import StreamingConfig
from engine.audio.decoder import StreamingDecoder
from engine.audio.stage import AudioStage
from engine.gpu_config import GpuConfig
from model.codecs.base import lag_frames
from model.families.joe.codec import load_joe_codec
from tests.model.families.joe.streamed import PARITY, assert_equals_whole_decode, stream_through



@pytest.fixture(scope="module")
def latents(latent_frontend) -> list[torch.Tensor]:
    texts = ("The quick brown fox jumps over the lazy dog.", "Yes, of course.")
    return [torch.from_numpy(latent_frontend.run(t).latent) for t in texts]


@pytest.fixture(scope="module", params=["istft-torch", "istft-onnxruntime"])
def codec(request):
    return load_joe_codec(codec=request.param)


def test_pieces_of_any_size_and_a_batch_at_different_positions_equal_the_whole_decode(codec, latents):
    inc = codec.incremental
    flush = lag_frames(inc, codec.samples_per_frame)
    long, short = latents
    rng = np.random.default_rng(0)
    # The long stream goes alone for a while, then both go in batches of equal pieces.
    states = {0: inc.initial_state(), 1: inc.initial_state()}
    fed, out = {0: 0, 1: 0}, {0: [], 1: []}
    audio, (states[0],) = inc.decode(long[None, :13], [states[0]], [0], [None])
    out[0].append(audio[0]); fed[0] = 13
    while fed[1] < len(short):
        n = int(rng.integers(1, 12))
        n = min(n, len(short) - fed[1], len(long) - fed[0])
        pieces = torch.stack([long[fed[0] : fed[0] + n], short[fed[1] : fed[1] + n]])
        audio, (states[0], states[1]) = inc.decode(pieces, [states[0], states[1]], [fed[0], fed[1]], [None, None])
        for i in (0, 1):
            out[i].append(audio[i]); fed[i] += n
    for i, z in ((0, long), (1, short)):
        rest = z[fed[i]:]
        if len(rest):
            audio, (states[i],) = inc.decode(rest[None], [states[i]], [fed[i]], [None])
            out[i].append(audio[0])
        # The flush feeds garbage on purpose: past the end every frame counts as zero padding.
        audio, _ = inc.decode(torch.randn(1, flush, z.shape[1]), [states[i]], [len(z)], [len(z)])
        out[i].append(audio[0])
        streamed = torch.cat(out[i]).numpy()[inc.delay_samples : inc.delay_samples + len(z) * codec.samples_per_frame]
        whole = codec.decode(z[None])[0].numpy()
        assert np.abs(streamed - whole).max() < PARITY


class Feeds:
    """Wraps an incremental decoder, counting the frames fed to it per stream position."""

    def __init__(self, inner) -> None:
        self.inner, self.delay_samples, self.frames = inner, inner.delay_samples, 0

    def initial_state(self):
        return self.inner.initial_state()

    def decode(self, frames, states, frames_before, totals):
        self.frames += frames.shape[0] * frames.shape[1]
        return self.inner.decode(frames, states, frames_before, totals)


# joe's own chunking, and a first chunk longer than the left context (frames not fed yet must
# outlive the first chunk's trimming).
@pytest.mark.parametrize("fields", [{}, {"first_chunk_frames": 16, "left_context_frames": 4}])
def test_the_engine_decoder_feeds_every_frame_once_and_streams_the_whole_decode(latents, fields):
    codec = load_joe_codec(codec="istft-onnxruntime")
    feeds = Feeds(codec.incremental)
    config = StreamingConfig(**fields).resolve(codec.window_hints)
    decoder = StreamingDecoder(codec, config, feeds, capacity=CapacityConfig(urgent_slack_seconds=0))
    pieces = stream_through(decoder, latents, 8)  # the student's 8 frames a step
    assert not decoder.take_failures()
    flush = lag_frames(feeds, codec.samples_per_frame)
    assert feeds.frames == sum(len(z) + flush for z in latents)
    assert_equals_whole_decode(codec, latents, pieces, config.first_chunk_frames)


def test_a_stream_whose_decode_fails_ends_alone(latents):
    codec = load_joe_codec(codec="istft-onnxruntime")

    marker = 1234.0

    class FailsOnMarker:
        delay_samples = codec.incremental.delay_samples
        initial_state = codec.incremental.initial_state

        def decode(self, frames, states, frames_before, totals):
            if (frames == marker).any():
                raise ValueError("bad frames")
            return codec.incremental.decode(frames, states, frames_before, totals)

    decoder = StreamingDecoder(codec, StreamingConfig().resolve(codec.window_hints), FailsOnMarker(),
                               capacity=CapacityConfig(urgent_slack_seconds=0))
    good, bad = latents[0][:40], latents[0][:40].clone()
    bad[30, 0] = marker  # past the first chunk: only the incremental decoder sees it
    listeners = {"good": Listener(codec.sample_rate), "bad": Listener(codec.sample_rate)}
    decoder.open("good", listeners["good"]), decoder.open("bad", listeners["bad"])
    emitted, failed = {"good": 0, "bad": 0}, set()

    def emit(now: float) -> None:  # as the engine's request table: the listeners hear what left
        for stream_id, chunk in decoder.decode_ready(now).items():
            emitted[stream_id] += len(chunk.pcm)
            listeners[stream_id].received(len(chunk.pcm), now)

    for step in range(0, 40, 8):
        decoder.push("good", good[step : step + 8])
        if "bad" not in failed:  # the engine ends a failed request: nothing more is pushed
            decoder.push("bad", bad[step : step + 8])
        emit(now=0.05 * step)  # about real time: the listeners hold little, so each step feeds
        failed |= set(decoder.take_failures())
    assert failed == {"bad"}
    decoder.finish("good")
    emit(now=2.0)
    assert emitted["good"] == 40 * codec.samples_per_frame and decoder.num_streams == 0


def test_the_cpu_audio_stage_decodes_incrementally_unless_told_not_to():
    codec = load_joe_codec(codec="istft-onnxruntime")
    cpu = torch.device("cpu")
    on = AudioStage.build(codec, StreamingConfig().resolve(codec.window_hints), CapacityConfig(), GpuConfig(), cpu, 8)
    off = AudioStage.build(codec, StreamingConfig(incremental=False).resolve(codec.window_hints), CapacityConfig(),
                           GpuConfig(), cpu, 8)
    assert on.decoder.incremental is codec.incremental and off.decoder.incremental is None
    # Later chunks wait for the decoder's lag (10.6 frames), the first one keeps its 8.
    assert on.decoder.config.lookahead_frames == 11 and on.decoder.config.first_lookahead_frames == 8
    with pytest.raises(ValueError, match="crossfade"):
        StreamingDecoder(codec, StreamingConfig(crossfade_samples=64).resolve(codec.window_hints), codec.incremental)


class Pieces(Feeds):
    """Also records each call's piece length."""

    def __init__(self, inner) -> None:
        super().__init__(inner)
        self.pieces: list[int] = []

    def decode(self, frames, states, frames_before, totals):
        self.pieces.append(frames.shape[1])
        return super().decode(frames, states, frames_before, totals)


def test_a_listener_low_on_audio_gets_all_final_audio_each_step_and_one_far_ahead_waits_for_a_piece(latents):
    """Clock given: the first chunk is a window (nothing fed before it); then, holding under half
    a second, the stream is fed each step and every final frame leaves (its second chunk does not
    wait for 8 more frames); holding more, it is fed 64 frames at a time."""
    codec = load_joe_codec(codec="istft-onnxruntime")
    feeds = Pieces(codec.incremental)
    decoder = StreamingDecoder(codec, StreamingConfig().resolve(codec.window_hints), feeds)
    z = latents[0]
    listener = Listener(codec.sample_rate)
    decoder.open("s", listener)

    def step(frames: int, now: float):
        decoder.push("s", z[:0] if not frames else z[step.received : step.received + frames])
        step.received += frames
        chunk = decoder.collect(decoder.launch(now=now)).get("s")
        if chunk is None:
            return None
        listener.received(len(chunk.pcm), now)  # as the engine's request table does
        return chunk.frame_start, chunk.frame_end

    step.received = 0
    assert step(8, 0.0) is None
    assert step(8, 0.0) == (0, 8) and feeds.pieces == []  # the first chunk: a window
    assert step(8, 0.05) == (8, 13)  # 24 frames fed, 11 of lag: 5 more frames now, not 8 later
    assert step(8, 0.10) == (13, 21) and feeds.pieces == [24, 8]
    assert step(48, 0.10) == (21, 69)  # 0.8 s out, ~0.6 s ahead of the listener
    for k in range(7):  # 56 new frames: fewer than a piece, and the listener has plenty
        assert step(8, 0.11 + 0.01 * k) is None
    assert step(8, 0.2) == (69, 133) and feeds.pieces == [24, 8, 48, 64]
