"""The depth stage: the code predictor fills codes 1..G-1 of every emitting stream's frame, one
batched call per code across all streams.

Each frame's predictor context is short and private to that frame (the talker's hidden state,
code 0, then each code it predicts: G positions) and nothing of it survives the frame, so it lives
in a per-step scratch cache rather than in paged blocks held across steps: row b of a step owns
block b of the scratch (one block of >= G positions), every row is at the same position at each
sub-step, so the attention metadata of a sub-step depends on the batch size only and is built once
per batch size. Paging it would hold blocks between frames for nothing and add block-table work to
every sub-step.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import torch
from torch import Tensor, nn

from model.attention import AttentionBackend, AttentionMetadata
from model.families.qwen3_tts.config import Qwen3TtsConfig
from model.families.qwen3_tts.talker import TALKER, qwen3_arch
from model.llama.layers import LlamaDecoderLayer, RMSNorm, RotaryEmbedding
from model.llama.model import copy_weights, layer_destinations
from model.sampling import SamplingState
from model.sampling.substeps import SubStepSampler

PREDICTOR = TALKER + "code_predictor."


class CodePredictor(nn.Module):
    """A small Qwen3 decoder with one input table and one head per code 1..G-1. Invariant: after
    `reserve(rows)`, `predict` of up to `rows` streams writes only its scratch cache, and row b's
    codes depend on row b's inputs and sampling state only (no attention crosses rows)."""

    def __init__(self, config: Qwen3TtsConfig, attention: AttentionBackend) -> None:
        super().__init__()
        shape = config.predictor
        self.num_codes = config.num_code_groups - 1
        self.arch = qwen3_arch(shape.as_llama_dict(config.predictor_vocab_size, config.num_code_groups))
        self.rotary = RotaryEmbedding(shape.head_dim, config.num_code_groups, shape.rope_theta, None)
        self.layers = nn.ModuleList(LlamaDecoderLayer(self.arch, attention, self.rotary) for _ in range(shape.num_layers))
        self.norm = RMSNorm(shape.hidden_size, shape.rms_norm_eps)
        talker_hidden = config.talker.hidden_size
        self.projection: nn.Module = (nn.Linear(talker_hidden, shape.hidden_size) if talker_hidden != shape.hidden_size
                                      else nn.Identity())
        # Code k + 1's input table is code_embeddings[k]: one tensor, so a frame's fifteen codes
        # embed in one lookup (`embed_codes`) rather than fifteen.
        self.code_embeddings = nn.Parameter(torch.zeros(self.num_codes, config.predictor_vocab_size, talker_hidden),
                                            requires_grad=False)
        self.heads = nn.ModuleList(nn.Linear(shape.hidden_size, config.predictor_vocab_size, bias=False)
                                   for _ in range(self.num_codes))
        # One block per row holds a frame's positions (the hidden state, then codes 0..G-2).
        self.block_size = 1 << (config.num_code_groups - 1).bit_length()
        self.sampler = SubStepSampler()
        self._scratch: list[Tensor] = []
        self._final = False  # the scratch cache may not be replaced (see reserve)
        self._plans: dict[int, list[tuple[AttentionMetadata, Tensor]]] = {}

    @property
    def max_rows(self) -> int:
        return self._scratch[0].shape[1] if self._scratch else 0

    def reserve(self, rows: int, final: bool = False) -> None:
        """Allocates the scratch cache for up to `rows` streams per step; `final`: never again
        (graphs captured over it keep its addresses: a larger batch is an error, not a new cache)."""
        if rows <= self.max_rows:
            self._final = self._final or final
            return
        if self._final:
            raise RuntimeError(f"the code predictor's scratch cache holds {self.max_rows} rows for good "
                               f"(captured graphs use it); {rows} rows do not fit")
        self._final = final
        weight = self.norm.weight
        shape = (2, rows, self.block_size, self.arch.num_key_value_heads, self.arch.head_dim)
        self._scratch = [torch.zeros(shape, dtype=weight.dtype, device=weight.device) for _ in self.layers]
        self._plans.clear()

    @property
    def vocab_size(self) -> int:
        return self.heads[0].out_features

    @torch.inference_mode()
    def predict(self, hidden: Tensor, first_code_embeds: Tensor, states: Sequence[SamplingState]) -> Tensor:
        """Codes 1..G-1 [B, G-1] of each row's frame, from the talker's hidden state [B, H] and the
        talker-table embedding of its code 0 [B, H], each code drawn with the row's own state."""
        self.sampler.start(states, self.num_codes, self.vocab_size, hidden.device)
        return self.run_substeps(hidden, first_code_embeds, self.sampler.draw)

    def run_substeps(self, hidden: Tensor, first_code_embeds: Tensor, draw: Callable[[Tensor, int], Tensor]) -> Tensor:
        """`predict` with the draws of a frame already started: `draw(logits, index)` picks code
        index + 1 of every row (a SubStepSampler's, or a decode graph's GraphSubStepSampler's). Only
        fixed-shape tensor work once the batch size's plan exists: what a CUDA graph captures."""
        rows = hidden.shape[0]
        self.reserve(rows)
        plan = self._plan_for(rows)
        # Sub-step 0 prefills the two positions (hidden, code 0) of every row; each later sub-step
        # feeds the code just drawn. The sub-talker's states need no history (no penalty, no
        # minimum length), so nothing is appended to them.
        inputs = torch.stack((hidden, first_code_embeds), dim=1).reshape(2 * rows, -1)
        tables = self.code_embeddings.unbind(0)  # views: code k + 1's table without a select per sub-step
        codes: list[Tensor] = []
        for index, (meta, positions) in enumerate(plan):
            code = draw(self._forward(inputs, positions, meta, index), index)
            codes.append(code)
            if index + 1 < self.num_codes:
                inputs = self._lookup(tables[index], code)
        return torch.stack(codes, dim=1)

    @staticmethod
    def _lookup(table: Tensor, code: Tensor) -> Tensor:
        """The next sub-step's input: the code just drawn, in its own table (the predictor's input
        embedding, which the reference's forward computes from the code; a call of its own, so
        that a profile can count it with the forwards rather than with the sampling)."""
        return table.index_select(0, code)

    def embed_codes(self, codes: Tensor) -> Tensor:
        """The predictor-table embeddings of codes 1..G-1 ([N, G-1] → [N, G-1, H]), summed by the caller."""
        tables = self.code_embeddings
        offsets = torch.arange(self.num_codes, device=codes.device) * tables.shape[1]  # code k + 1's first row
        return tables.flatten(0, 1)[codes + offsets]

    def _forward(self, inputs: Tensor, positions: Tensor, meta: AttentionMetadata, index: int) -> Tensor:
        """Sub-step `index`: the decoder over this sub-step's inputs, then code index + 1's head
        (logits [B, V]; at sub-step 0, of each row's second position, its code 0)."""
        hidden = self.projection(inputs)
        for layer, cache in zip(self.layers, self._scratch):
            hidden = layer(hidden, positions, cache, meta)
        if index == 0:
            hidden = hidden[1::2]
        return self.heads[index](self.norm(hidden)).float()

    def _plan_for(self, rows: int) -> list[tuple[AttentionMetadata, Tensor]]:
        """Per sub-step, the attention metadata and positions of `rows` rows (built once per size)."""
        plan = self._plans.get(rows)
        if plan is None:
            device = self.norm.weight.device
            tables = [[row] for row in range(rows)]
            plan = [(AttentionMetadata.build(query_lens=[1] * rows, context_lens=[index + 1] * rows,
                                             block_tables=tables, block_size=self.block_size, device=device),
                     torch.full((rows,), index + 1, device=device))
                    for index in range(self.num_codes)]
            plan[0] = (AttentionMetadata.build(query_lens=[2] * rows, context_lens=[0] * rows, block_tables=tables,
                                               block_size=self.block_size, device=device),
                       torch.arange(2, device=device).repeat(rows))
            self._plans[rows] = plan
        return plan

    def destinations(self) -> dict[str, Tensor]:
        names = {PREDICTOR + "model.norm.weight": self.norm.weight}
        for index, layer in enumerate(self.layers):
            names.update(layer_destinations(layer, f"{PREDICTOR}model.layers.{index}."))
        for k in range(self.num_codes):
            names[f"{PREDICTOR}model.codec_embedding.{k}.weight"] = self.code_embeddings[k]
            names[f"{PREDICTOR}lm_head.{k}.weight"] = self.heads[k].weight
        if isinstance(self.projection, nn.Linear):
            names[PREDICTOR + "small_to_mtp_projection.weight"] = self.projection.weight
            names[PREDICTOR + "small_to_mtp_projection.bias"] = self.projection.bias
        return names

    def load_weights(self, weights: Iterable[tuple[str, Tensor]]) -> None:
        copy_weights(self.destinations(), weights)
