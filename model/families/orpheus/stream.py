"""One Orpheus request's state between steps: its tokens, its sampler state and its frame assembly."""
from __future__ import annotations

import torch

from model.families.base import SpeechPrompt, StreamState
from model.families.orpheus.frames import FrameAssembler
from model.families.orpheus.layout import OrpheusTokenLayout
from model.sampling import SamplingParams, SamplingState


class OrpheusStream(StreamState):
    """Token ids of prompt + outputs (the inputs of every position), the sampler's per-request
    state and the frame assembler. Invariant: len(token_ids) == prompt_len + outputs accepted."""

    def __init__(
        self, prompt: SpeechPrompt, params: SamplingParams, layout: OrpheusTokenLayout, device: torch.device
    ) -> None:
        super().__init__(prompt, params)
        self.token_ids = list(prompt.token_ids)
        self.sampling = SamplingState(params, prompt.token_ids, device=device)
        self.frames = FrameAssembler(layout)

    @property
    def num_invalid_outputs(self) -> int:
        return self.frames.num_invalid
