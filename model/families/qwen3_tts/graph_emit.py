"""The Qwen3-TTS decode step's head, code 0 and depth stage, captured in the decode graph.

On a GPU, a frame's sixteen codes are sixteen small launches each of many kernels (the talker's
head and code 0's draw, then fifteen code-predictor forwards and draws): eager, the host's
launches would take longer than the kernels. Inside the decode graph they replay as one.
"""
from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor

from model.families.qwen3_tts.depth import CodePredictor
from model.families.qwen3_tts.stream import Qwen3Stream
from model.llama.model import LlamaModel
from model.sampling.graph_sampler import GraphSampler
from model.sampling.graph_substeps import GraphSubStepSampler
from model.sampling.sampler import top_k_kept


class Qwen3GraphEmitter:
    """Talker head → code 0 among `code_0_ids` (end of speech masked for rows whose text goes on)
    → codes 1..G-1 from the code predictor, one batched forward and draw per code, from buffers
    `prepare` fills. Invariant: for the same hidden states and generator states it emits what
    `Qwen3Family.head` and `emit` emit (GraphSampler's equality with Sampler, and
    GraphSubStepSampler's with SubStepSampler); padding rows write only their own rows."""

    def __init__(self, backbone: LlamaModel, predictor: CodePredictor, code_0_ids: Tensor, eos: int,
                 depth_top_k: int, max_rows: int) -> None:
        self.backbone = backbone
        self.predictor = predictor
        self.eos = eos
        device = backbone.device
        width = len(code_0_ids)
        self.sampler = GraphSampler(max_rows, backbone.config.vocab_size, (eos,), width, device)
        self.candidates = code_0_ids.to(device)[None, :].expand(max_rows, width)
        vocab = predictor.vocab_size
        self.substeps = GraphSubStepSampler(max_rows, predictor.num_codes, vocab, top_k_kept(depth_top_k, vocab), device)
        self.eos_blocked = torch.zeros(max_rows, dtype=torch.bool, device=device)
        self._blocked: tuple[list[bool], int] | None = None  # what eos_blocked holds: rows' flags, padded size
        self.frames = torch.zeros(max_rows, predictor.num_codes + 1, dtype=torch.long, device=device)
        predictor.reserve(max_rows, final=True)  # the scratch cache is allocated before any capture, for good

    def prepare(self, streams: Sequence[Qwen3Stream], emits: Sequence[bool], padded: int) -> None:
        batch = len(streams)
        blocked = ([not s.text_complete for s in streams], padded)
        if blocked != self._blocked:  # written when a row's text ends or the rows change, not every step
            self.eos_blocked[:batch].copy_(torch.tensor(blocked[0]))
            self.eos_blocked[batch:padded].fill_(False)
            self._blocked = blocked
        # A seeded request draws code 0's noise and its sub-steps' from two generators of its own.
        self.sampler.prepare([s.sampling for s in streams], emits, padded)
        self.substeps.prepare([s.depth_sampling for s in streams], emits, padded)

    def emit(self, hidden: Tensor) -> Tensor:
        rows = hidden.shape[0]
        logits = self.backbone.compute_logits(hidden)
        logits[:, self.eos] = logits[:, self.eos].masked_fill(self.eos_blocked[:rows], float("-inf"))
        first = self.sampler.sample(logits, self.candidates[:rows])
        rest = self.predictor.run_substeps(hidden, self.backbone.embed_tokens(first), self.substeps.draw)
        self.frames[:rows, 0] = first
        self.frames[:rows, 1:] = rest
        return self.frames[:rows]

    def outputs(self, emitted: Tensor) -> list[list[int]]:
        return emitted.tolist()
