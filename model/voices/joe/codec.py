"""The joe voice's frames (columns of the teacher latent z) → PCM through the HiFi-GAN decoder.

Two runners of the same decoder: our PyTorch port (GPU, and the reference) and the voice's own
decoder sub-graph through onnxruntime, which is what the CPU serves with: on the 2-core machine
it decodes the same windows 1.5-2.3x faster than the port under torch's oneDNN convolutions
(measured 54 vs 128 ms for 100 frames, 2 threads). Both equal each other to ~2e-6
(tests/voices/test_codec.py).
"""
from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from model.codecs.base import FrameCodec
from model.codecs.streaming import StreamingConfig
from model.voices.joe.hifigan import HifiGanConfig, HifiGanDecoder
from model.voices.joe.teacher import AUDIO, DECODER_CUT, LATENT, decoder_state_dict, open_session

# Measured (tests/voices/test_codec.py): one z column moves the decoder's output from ~9.9 frames
# before it to ~9.7 frames after it (changes > 1e-5; > 1e-3 only within -6.6..+8.2 frames). With
# 10 frames of context each side a streamed window equals the whole-utterance decode (max error
# ~2e-6), so seams need no crossfade. Every window pays its 20 frames of context, so chunks
# grow from 8 frames (the first audio) to 64 (0.74 s: 1.3x the decoding of the audio alone).
# Urgent short chunks are off: with 8 concurrent streams on 2 cores they made the slowest
# stream's RTF 1.16 instead of 0.72 (each 8-frame window decodes 28 frames).
JOE_STREAMING = StreamingConfig(
    first_chunk_frames=8,
    chunk_frames=64,
    grow_chunks=True,
    urgent_slack_seconds=None,
    left_context_frames=10,
    lookahead_frames=10,
    crossfade_samples=0,
)


class JoeFrameCodec(FrameCodec):
    """A frame is one column of z (192 float32); frame i decodes to samples [i * hop, (i + 1) *
    hop) because every upsampling layer is centred on its input. Subclasses run the decoder."""

    frame_dtype = torch.float32

    def __init__(self, config: HifiGanConfig) -> None:
        self.frame_shape = (config.latent_channels,)
        self.samples_per_frame = config.hop_length
        self.sample_rate = config.sample_rate

    def check_frames(self, frames: Tensor, leading_dims: int) -> None:
        super().check_frames(frames, leading_dims)
        if frames.is_floating_point() and not bool(torch.isfinite(frames).all()):
            raise ValueError("latent frames must be finite")


class HifiGanFrameCodec(JoeFrameCodec):
    """Decodes with our PyTorch port, on the decoder's device."""

    def __init__(self, decoder: HifiGanDecoder) -> None:
        super().__init__(decoder.config)
        self.decoder = decoder.eval()
        self.device = next(decoder.parameters()).device

    def decode(self, frames: Tensor) -> Tensor:
        self.check_frames(frames, leading_dims=2)
        with torch.inference_mode():
            z = frames.to(device=self.device, dtype=torch.float32).transpose(1, 2)
            return self.decoder(z).float()


class OnnxHifiGanFrameCodec(JoeFrameCodec):
    """Decodes with the voice's own decoder sub-graph in onnxruntime (CPU)."""

    def __init__(self, threads: int) -> None:
        super().__init__(HifiGanConfig())
        self.session = open_session(DECODER_CUT, threads)

    def decode(self, frames: Tensor) -> Tensor:
        self.check_frames(frames, leading_dims=2)
        z = np.ascontiguousarray(frames.detach().to("cpu", torch.float32).transpose(1, 2).numpy())
        (audio,) = self.session.run([AUDIO], {LATENT: z})
        return torch.from_numpy(audio.reshape(z.shape[0], -1))


def load_joe_codec(device: torch.device | str = "cpu", backend: str = "auto") -> JoeFrameCodec:
    """`auto`: onnxruntime on the CPU (faster there), the PyTorch port on a GPU. `torch` and
    `onnxruntime` force one. Weights come from the installed voice package either way."""
    device = torch.device(device)
    if backend == "auto":
        backend = "onnxruntime" if device.type == "cpu" else "torch"
    if backend == "onnxruntime":
        if device.type != "cpu":
            raise ValueError("the onnxruntime codec runs on the CPU only")
        return OnnxHifiGanFrameCodec(threads=torch.get_num_threads())
    if backend != "torch":
        raise ValueError(f"codec backend must be auto, torch or onnxruntime, got {backend!r}")
    return HifiGanFrameCodec(HifiGanDecoder.from_state_dict(decoder_state_dict()).to(device))
