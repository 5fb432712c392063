"""The student over padded batches of whole utterances (training, and parity with the engine).

The engine runs the student's backbone over a flat token batch with a paged KV cache. Training
needs the same function over [batch, length] with gradients, so this runs the very same
modules (weights, norms, rotary table) with dense causal attention instead. Rows are right-padded;
with a causal mask a padded tail never influences the positions before it, so no key mask is
needed and the loss simply ignores the tail.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from model.families.joe.student import JoeStudent
from model.llama.model import LlamaModel


@dataclass(slots=True)
class StudentBatch:
    """Teacher-forced inputs of B utterances. Invariant: for row b, phonemes occupy positions
    [0, num_phonemes[b]) and steps [num_phonemes[b], num_phonemes[b] + num_steps[b]); `windows`,
    `previous` and `targets` hold the steps packed row-major in that order."""

    phoneme_ids: Tensor     # [B, L] long (padding anywhere past each row's phonemes)
    num_phonemes: Tensor    # [B] long
    num_steps: Tensor       # [B] long
    windows: Tensor         # [N, W * C] standardized prior windows, N = sum(num_steps)
    previous: Tensor        # [N, r * C] standardized previous step outputs (zeros at step 0)
    targets: Tensor         # [N, r * C] standardized z of each step
    target_mask: Tensor     # [N, r * C] 1 where a target frame exists (the last group may be short)

    @property
    def length(self) -> int:
        return int((self.num_phonemes + self.num_steps).max())


def step_scatter_index(batch: StudentBatch) -> tuple[Tensor, Tensor]:
    """(row, position) of every packed step in the padded [B, L] layout."""
    rows = torch.repeat_interleave(torch.arange(len(batch.num_steps)), batch.num_steps)
    starts = torch.repeat_interleave(batch.num_phonemes, batch.num_steps)
    first = torch.repeat_interleave(torch.cumsum(batch.num_steps, 0) - batch.num_steps, batch.num_steps)
    return rows, starts + torch.arange(len(rows)) - first


def forward_steps(student: JoeStudent, batch: StudentBatch) -> Tensor:
    """Standardized step outputs [N, r * C] for the packed steps of `batch`."""
    device = student.prior_mean.device
    length = batch.length
    embeds = student.backbone.embed_tokens(batch.phoneme_ids[:, :length].to(device))
    step_in = student.step_inputs(student.prior_proj(batch.windows.to(device)), batch.previous.to(device))
    rows, positions = step_scatter_index(batch)
    embeds = embeds.index_put((rows.to(device), positions.to(device)), step_in.to(embeds.dtype))
    hidden = causal_backbone(student.backbone, embeds)
    return student.head(hidden[rows.to(device), positions.to(device)])


def causal_backbone(backbone: LlamaModel, embeds: Tensor) -> Tensor:
    """Final-normed hidden states [B, L, H] of `backbone` over dense rows with causal attention."""
    batch, length, _ = embeds.shape
    positions = torch.arange(length, device=embeds.device).repeat(batch)
    hidden = embeds
    for layer in backbone.layers:
        attn = layer.self_attn
        x = layer.input_layernorm(hidden).reshape(batch * length, -1)
        query, key, value = attn.qkv_proj(x).split(attn.qkv_sizes, dim=-1)
        query = query.view(batch * length, attn.num_heads, attn.head_dim)
        key = key.view(batch * length, attn.num_kv_heads, attn.head_dim)
        query, key = attn.rotary.apply(positions, query, key, length)
        # [B, heads, L, D] for scaled_dot_product_attention; kv heads are shared by query groups.
        query = query.view(batch, length, attn.num_heads, attn.head_dim).transpose(1, 2)
        key = key.view(batch, length, attn.num_kv_heads, attn.head_dim).transpose(1, 2)
        value = value.view(batch, length, attn.num_kv_heads, attn.head_dim).transpose(1, 2)
        out = F.scaled_dot_product_attention(query, key, value, is_causal=True, scale=attn.scale,
                                             enable_gqa=attn.num_heads != attn.num_kv_heads)
        out = out.transpose(1, 2).reshape(batch, length, attn.num_heads * attn.head_dim)
        hidden = hidden + attn.o_proj(out)
        hidden = hidden + layer.mlp(layer.post_attention_layernorm(hidden))
    return backbone.norm(hidden)


def masked_l1(predicted: Tensor, batch: StudentBatch) -> Tensor:
    mask = batch.target_mask.to(predicted)
    return ((predicted - batch.targets.to(predicted)).abs() * mask).sum() / mask.sum().clamp(min=1)
