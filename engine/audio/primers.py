"""Codec states a stream starts from instead of silence.

A prompt may carry a codec prefix (SpeechPrompt.codec_prefix): frames whose audio is not the
stream's but which its codec hears first. Qwen3-TTS's in-context clone is one: the reference
decodes the clip's codes and the speech's together and cuts the clip's audio off, so its speech
begins from the state the clip left in the codec. A stream with a prefix starts from that state,
with its positions counted after the prefix's frames, so its audio is the reference's; the clip
is decoded once per prefix, not once per request.

The state is a fixed set of tensors (a slotted decoder's: model/codecs/base.py), a few MB at the
released sizes (Qwen3-TTS 12 Hz: ~5.2 MB in float32). Primers are kept on the host, the least
recently used dropped first within a budget of bytes; a dropped one is made again when next asked
for, and one larger than the whole budget is made and used but never kept.
"""
from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass

import torch
from torch import Tensor

from model.codecs.base import SlottedDecoder

# A prefix is decoded in calls of at most this many frames (a clip's 30 s are 375 frames of the 12
# Hz codec): a call's working memory grows with its frames.
PRIMING_FRAMES_PER_CALL = 128


@dataclass(frozen=True, slots=True)
class Primer:
    """The state a codec is in after decoding `frames` frames of a prefix from silence: one host
    tensor per state tensor of a slot, as the decoder's `state_shapes` lists them."""

    frames: int
    states: tuple[Tensor, ...]

    @property
    def nbytes(self) -> int:
        return sum(state.numel() * state.element_size() for state in self.states)


class CodecPrimers:
    """The primers of the prefixes streams came with. Invariants: the kept primers' bytes sum to
    at most `budget_bytes`; `primer(prefix)` is the decoder's state after the prefix whatever was
    kept (a prefix is decoded again after its primer was dropped); `made` counts the prefixes
    decoded."""

    def __init__(self, decoder: SlottedDecoder, budget_bytes: int, device: torch.device | str = "cpu") -> None:
        if budget_bytes < 0:
            raise ValueError(f"the primers' budget must be >= 0 bytes, got {budget_bytes}")
        self.decoder = decoder
        self.device = device
        self.budget_bytes = budget_bytes
        self._kept: OrderedDict[str, Primer] = OrderedDict()
        self.made = 0

    @property
    def kept_bytes(self) -> int:
        return sum(primer.nbytes for primer in self._kept.values())

    def __len__(self) -> int:
        return len(self._kept)

    def primer(self, prefix: Tensor) -> Primer:
        """The state after `prefix` [frames, *frame_shape]: kept, or decoded now (and kept when it
        fits the budget, the least recently used dropped to make room)."""
        key = _key(prefix)
        primer = self._kept.get(key)
        if primer is not None:
            self._kept.move_to_end(key)
            return primer
        primer = self._decode(prefix)
        if primer.nbytes <= self.budget_bytes:
            while self._kept and self.kept_bytes + primer.nbytes > self.budget_bytes:
                self._kept.popitem(last=False)
            self._kept[key] = primer
        return primer

    def _decode(self, prefix: Tensor) -> Primer:
        """The prefix through the decoder from silence, in calls of PRIMING_FRAMES_PER_CALL frames."""
        self.made += 1
        shapes = self.decoder.state_shapes()
        states = [torch.zeros((1, *shape), dtype=dtype, device=self.device) for shape, dtype in shapes]
        for start in range(0, prefix.shape[0], PRIMING_FRAMES_PER_CALL):
            piece = prefix[start:start + PRIMING_FRAMES_PER_CALL].unsqueeze(0)
            _, states = self.decoder.step(piece, torch.tensor([start]), states)
        return Primer(int(prefix.shape[0]), tuple(state[0].to("cpu", copy=True) for state in states))


def _key(prefix: Tensor) -> str:
    """What identifies a prefix: its frames, shape and type."""
    frames = prefix.detach().to("cpu").contiguous()
    digest = hashlib.sha256(f"{tuple(frames.shape)}:{frames.dtype}".encode())
    digest.update(frames.numpy().tobytes())
    return digest.hexdigest()
