"""The HiFi-GAN port against the voice's own ONNX decoder sub-graph, and streamed decode.

Measured: on teacher z the port matches onnxruntime to max |Δ| ≈ 2e-6 (audio peak ≈ 0.5);
asserted < 1e-4. Streaming with joe's window hints matches whole decode to ≈ 2e-6 after the first
chunk (asserted < 1e-4) and within 2e-3 in it (its shorter lookahead), for the HiFi-GAN and for
the distilled iSTFT decoder the engine serves with.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.voice_packages import require_voice_packages

require_voice_packages()

from capacity.config import CapacityConfig
from engine.audio.config import StreamingConfig
from engine.audio.decoder import StreamingDecoder
from model.codecs.base import FrameCodec
from model.families.joe.codec import OnnxFrameCodec, TorchFrameCodec, load_joe_codec
from model.families.joe.teacher import AUDIO, DECODER_CUT, LATENT, TeacherScales, open_session
from tests.model.families.joe.streamed import PARITY, assert_equals_whole_decode, stream_through



@pytest.fixture(scope="module")
def codec() -> TorchFrameCodec:
    return load_joe_codec(codec="hifigan-torch")


@pytest.fixture(scope="module")
def latents(latent_frontend) -> list[torch.Tensor]:
    texts = ("The quick brown fox jumps over the lazy dog.", "Yes, of course.")
    return [torch.from_numpy(latent_frontend.run(t).latent) for t in texts]


def test_shape_matches_the_voice(codec):
    assert sum(p.numel() for p in codec.decoder.parameters()) == 1_662_976
    assert (codec.sample_rate, codec.samples_per_frame, codec.frame_shape) == (22050, 256, (192,))


def test_port_equals_onnx_decoder(codec, latents):
    session = open_session(DECODER_CUT)
    z = latents[0]
    expected = session.run([AUDIO], {LATENT: z.T[None].numpy()})[0].reshape(-1)
    actual = codec.decode(z[None])[0].numpy()
    assert actual.shape == expected.shape == (z.shape[0] * 256,)
    assert np.abs(expected).max() > 0.1  # real speech, not a silent pass
    assert np.abs(actual - expected).max() < PARITY


def test_onnxruntime_runner_equals_the_port_on_batches(codec, latents):
    served = load_joe_codec(codec="hifigan")  # the teacher's decoder, as the CPU runs it
    assert isinstance(served, OnnxFrameCodec)
    frames = torch.stack([latents[0][:40], latents[1][:40]])
    np.testing.assert_allclose(served.decode(frames).numpy(), codec.decode(frames).numpy(), atol=PARITY)


def test_istft_decoder_exported_to_onnx_equals_the_module(latents):
    served, module = load_joe_codec(codec="istft-onnxruntime"), load_joe_codec(codec="istft-torch")
    assert isinstance(served, OnnxFrameCodec) and isinstance(module, TorchFrameCodec)
    frames = torch.stack([latents[0][:40], latents[1][:40]])
    np.testing.assert_allclose(served.decode(frames).numpy(), module.decode(frames).numpy(), atol=PARITY)


def test_decoder_equals_full_teacher_audio(codec, latent_frontend):
    from model.families.joe.frontend import TeacherFrontend
    from model.families.joe.teacher import FULL_CUT

    result = TeacherFrontend(FULL_CUT).run("Hello there.", TeacherScales())
    decoded = codec.decode(torch.from_numpy(result.latent)[None])[0].numpy()
    assert np.abs(decoded - result.audio).max() < PARITY


@pytest.mark.parametrize("name", ["hifigan-torch", "istft-onnxruntime"])
def test_batched_streaming_equals_whole_decode(name, latents):
    codec = load_joe_codec(codec=name)

    class Counting(FrameCodec):
        def __init__(self) -> None:
            self.sample_rate, self.samples_per_frame = codec.sample_rate, codec.samples_per_frame
            self.frame_shape, self.frame_dtype = codec.frame_shape, codec.frame_dtype
            self.batches: list[int] = []

        def decode(self, frames):
            self.batches.append(frames.shape[0])
            return codec.decode(frames)

    counting = Counting()
    hints = codec.window_hints  # joe's, not the counting wrapper's (FrameCodec's defaults)
    capacity = CapacityConfig().resolve(hints.urgent_slack_seconds, hints.defer_slack_seconds)
    decoder = StreamingDecoder(counting, StreamingConfig().resolve(hints), capacity=capacity)
    pieces = stream_through(decoder, latents, 5)
    assert max(counting.batches) == 2  # equal-length windows of both streams in one call
    # The first chunk looks 8 frames ahead, not 10: off by at most ~2e-3 at its end.
    assert_equals_whole_decode(codec, latents, pieces, codec.window_hints.first_chunk_frames)


def test_unknown_codec_is_refused():
    with pytest.raises(ValueError, match="istft, hifigan"):
        load_joe_codec(codec="snac")


def test_rejects_non_finite_frames(codec):
    frames = torch.zeros(1, 3, 192)
    frames[0, 1, 5] = float("nan")
    with pytest.raises(ValueError, match="finite"):
        codec.decode(frames)
