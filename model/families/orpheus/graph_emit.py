"""The Orpheus decode step's head and constrained sampling, captured in the decode graph."""
from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor

from model.families.orpheus.layout import OrpheusTokenLayout
from model.families.orpheus.stream import OrpheusStream
from model.llama.model import LlamaModel
from model.sampling.graph_sampler import GraphSampler


class OrpheusGraphEmitter:
    """LM head → the codes valid at each row's next frame position (+ end_of_speech) → a token
    per row, from buffers `prepare` fills. Invariant: for the same hidden states and noise it
    emits what `OrpheusFamily.emit` emits after `head` (the same candidates, and GraphSampler's
    equality with Sampler)."""

    def __init__(
        self, backbone: LlamaModel, layout: OrpheusTokenLayout, constrain_audio_tokens: bool, max_rows: int
    ) -> None:
        self.backbone = backbone
        self.layout = layout
        self.constrain_audio_tokens = constrain_audio_tokens
        device = backbone.device
        width = layout.codebook_size + 1 if constrain_audio_tokens else None
        self.sampler = GraphSampler(max_rows, backbone.config.vocab_size, (layout.end_of_speech,), width, device)
        self.frame_positions = torch.zeros(max_rows, dtype=torch.long, device=device)

    def prepare(self, streams: Sequence[OrpheusStream], emits: Sequence[bool], padded: int) -> None:
        batch = len(streams)
        self.frame_positions[:batch].copy_(torch.tensor([s.frames.position for s in streams]))
        self.frame_positions[batch:padded].zero_()
        self.sampler.prepare([s.sampling for s in streams], emits, padded)

    def emit(self, hidden: Tensor) -> Tensor:
        logits = self.backbone.compute_logits(hidden)
        candidates = None
        if self.constrain_audio_tokens:
            candidates = self.layout.frame_candidates(logits, self.frame_positions[: hidden.shape[0]])
        return self.sampler.sample(logits, candidates)

    def outputs(self, emitted: Tensor) -> list[int]:
        return emitted.tolist()
