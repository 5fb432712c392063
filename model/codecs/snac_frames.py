"""Orpheus frames (7 SNAC codes each) → PCM through our SNAC decoder."""
from __future__ import annotations

import torch
from torch import Tensor

from model.codecs.base import FrameCodec, check_code_range
from model.codecs.snac import SnacDecoder

# Position p of an Orpheus frame holds a code of SNAC level LEVEL_OF_POSITION[p].
LEVEL_OF_POSITION = (0, 1, 2, 2, 1, 2, 2)
# Per level, the frame positions that fill it, in time order.
POSITIONS_OF_LEVEL = tuple(
    tuple(p for p, level in enumerate(LEVEL_OF_POSITION) if level == wanted) for wanted in range(3)
)


class SnacFrameCodec(FrameCodec):
    """A frame is 7 int64 codes in Orpheus order: level 0 gets position 0, level 1 positions 1
    and 4, level 2 positions 2, 3, 5, 6; one frame decodes to vq_strides[0] · hop samples."""

    frame_shape = (len(LEVEL_OF_POSITION),)
    frame_dtype = torch.int64

    def __init__(self, decoder: SnacDecoder) -> None:
        config = decoder.config
        if config.vq_strides != (4, 2, 1):
            raise ValueError(
                f"Orpheus frames need SNAC vq_strides (4, 2, 1), got {config.vq_strides}"
            )
        self.decoder = decoder
        self.sample_rate = config.sampling_rate
        self.samples_per_frame = config.vq_strides[0] * config.hop_length
        self.codebook_size = config.codebook_size
        self.device = next(decoder.parameters()).device
        # Index tensors made once: a python-list index would be copied to the device on every
        # decode, which a CUDA graph cannot capture.
        self._level_positions = [torch.tensor(p, device=self.device) for p in POSITIONS_OF_LEVEL]

    def check_frames(self, frames: Tensor, leading_dims: int) -> None:
        super().check_frames(frames, leading_dims)
        check_code_range(frames, self.codebook_size)

    def decode(self, frames: Tensor) -> Tensor:
        self.check_frames(frames, leading_dims=2)
        return self.decode_trusted(frames)

    def decode_trusted(self, frames: Tensor) -> Tensor:
        batch = frames.shape[0]
        with torch.inference_mode():
            frames = frames.to(device=self.device, dtype=torch.int64)
            codes = [frames.index_select(2, p).reshape(batch, -1) for p in self._level_positions]
            return self.decoder.decode(codes)[:, 0].float()
