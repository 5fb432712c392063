"""The joe voice's frames (columns of the teacher latent z) → PCM through our HiFi-GAN port."""
from __future__ import annotations

import torch
from torch import Tensor

from model.codecs.base import FrameCodec
from model.codecs.streaming import StreamingConfig
from model.voices.joe.hifigan import HifiGanDecoder
from model.voices.joe.teacher import decoder_state_dict

# Measured (tests/voices/test_codec.py): one z column moves the decoder's output from ~9.9 frames
# before it to ~9.7 frames after it (changes > 1e-5; > 1e-3 only within -6.6..+8.2 frames). With
# 10 frames of context each side a streamed window equals the whole-utterance decode (max error
# ~2e-6), so seams need no crossfade; the price is 116 ms of lookahead, which a student at RTF 0.1
# produces in ~12 ms.
JOE_STREAMING = StreamingConfig(
    first_chunk_frames=4,
    chunk_frames=16,
    left_context_frames=10,
    lookahead_frames=10,
    crossfade_samples=0,
)


class HifiGanFrameCodec(FrameCodec):
    """A frame is one column of z (latent_channels float32); frame i decodes to samples
    [i * hop, (i + 1) * hop) because every upsampling layer is centred on its input."""

    frame_dtype = torch.float32

    def __init__(self, decoder: HifiGanDecoder) -> None:
        self.decoder = decoder.eval()
        self.frame_shape = (decoder.config.latent_channels,)
        self.samples_per_frame = decoder.config.hop_length
        self.sample_rate = decoder.config.sample_rate
        self.device = next(decoder.parameters()).device

    def check_frames(self, frames: Tensor, leading_dims: int) -> None:
        super().check_frames(frames, leading_dims)
        if frames.is_floating_point() and not bool(torch.isfinite(frames).all()):
            raise ValueError("latent frames must be finite")

    def decode(self, frames: Tensor) -> Tensor:
        self.check_frames(frames, leading_dims=2)
        with torch.inference_mode():
            z = frames.to(device=self.device, dtype=torch.float32).transpose(1, 2)
            return self.decoder(z).float()


def load_joe_codec(device: torch.device | str = "cpu") -> HifiGanFrameCodec:
    """The codec with the decoder weights read from the installed voice package."""
    return HifiGanFrameCodec(HifiGanDecoder.from_state_dict(decoder_state_dict()).to(device))
