"""Qwen3-TTS's 12 Hz speech tokenizer, decoding side: frames of 16 codes → 24 kHz PCM, 1,920
samples a frame, read from a checkpoint's speech_tokenizer folder (qwen3_12hz_weights.py).

The decoder is causal end to end, so the engine's CPU path decodes it incrementally
(qwen3_12hz_stream.py) with no lag, and a window needs no lookahead.
"""
from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor

from model.codecs.base import FrameCodec, WindowHints, check_code_range
from model.codecs.qwen3_12hz_stream import Qwen3IncrementalDecoder, StreamedQwen3Decoder
from model.codecs.qwen3_12hz_weights import Qwen3CodecDecoder, load_decoder


class Qwen3Codec12Hz(FrameCodec):
    """A frame is one 12.5 Hz step's `num_quantizers` codes (int64, each in [0, codebook_size));
    `decode` equals the reference decoder's forward on the whole window (clamped to [-1, 1]), and
    frame i maps to samples [i * spf, (i + 1) * spf) because no layer looks ahead."""

    frame_dtype = torch.int64
    # Frame t's audio depends on frames <= t only, so a window needs no lookahead, and with none
    # a crossfade has nothing to blend: seams are exact once the left context covers the
    # decoder's memory. That memory is long (8 attention layers of 72-frame windows reach back
    # ~570 frames); the reference's own chunked decode settles for 25 frames of left context,
    # and so do windows here. On the CPU the engine decodes incrementally instead (every frame
    # once, exact), where only the first chunk is a window, and it starts at frame 0 with
    # nothing before it: exact too. A frame is 80 ms of audio, so the first chunk is one frame
    # and chunks grow from there (1, 1, 2, 4, ... up to 2 s: a window then costs at most twice
    # its frames). Not tuned by measurement yet.
    window_hints = WindowHints(
        first_chunk_frames=1,
        chunk_frames=25,
        grow_chunks=True,
        left_context_frames=25,
        lookahead_frames=0,
        first_lookahead_frames=0,
        crossfade_samples=0,
    )

    def __init__(self, decoder: Qwen3CodecDecoder) -> None:
        config = decoder.config
        self.config = config
        self.frame_shape = (config.num_quantizers,)
        self.sample_rate = config.sample_rate
        self.samples_per_frame = config.samples_per_frame
        self.streamed = StreamedQwen3Decoder(decoder)
        self.incremental = Qwen3IncrementalDecoder(self.streamed)

    @classmethod
    def from_folder(cls, folder: str | Path, device: torch.device | str = "cpu",
                    dtype: torch.dtype = torch.float32) -> Qwen3Codec12Hz:
        """The codec of a speech_tokenizer folder (config.json, model.safetensors)."""
        return cls(load_decoder(folder, device, dtype))

    def decode(self, frames: Tensor) -> Tensor:
        self.check_frames(frames, leading_dims=2)
        return self.decode_trusted(frames)

    def decode_trusted(self, frames: Tensor) -> Tensor:
        # A whole decode is every stream's first piece: zero states are the decoder's left padding.
        incremental = self.incremental
        audio, _ = incremental.step(frames, torch.zeros(frames.shape[0], dtype=torch.int64, device=frames.device),
                                    incremental.initial_states(frames.shape[0]))
        return audio

    def check_frames(self, frames: Tensor, leading_dims: int) -> None:
        super().check_frames(frames, leading_dims)
        if frames.is_floating_point() or frames.is_complex() or frames.dtype == torch.bool:
            raise ValueError(f"codes must be integers, got {frames.dtype}")
        check_code_range(frames, self.config.codebook_size)
