"""What the engine may use of a family's decoder: the `Backbone` protocol and the KV cache shape it needs."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

import torch
from torch import Tensor

from model.attention import AttentionBackend, AttentionMetadata


@dataclass(slots=True, frozen=True)
class KVSpec:
    """The KV cache a backbone reads and writes: one cache tensor per layer, each token holding
    `num_kv_heads` key and value heads of `head_dim` values (layout: AttentionBackend)."""

    num_layers: int
    num_kv_heads: int
    head_dim: int


class Backbone(Protocol):
    """A family's decoder as the engine sees it: `forward` maps a flat batch of T input embeddings
    [T, hidden_size] at absolute positions to T hidden states [T, hidden_size], writing each layer's
    new keys and values into its cache (`kv_spec` gives their shape) and nothing else. The engine
    uses no other member; a family's own `embed` and `head` may use more of its decoder."""

    @property
    def kv_spec(self) -> KVSpec: ...

    @property
    def hidden_size(self) -> int: ...

    @property
    def dtype(self) -> torch.dtype:
        """The parameters' dtype: the dtype of embeddings, hidden states and (unless fp8) the cache."""

    @property
    def device(self) -> torch.device: ...

    @property
    def attention_backend(self) -> AttentionBackend:
        """The backend every layer attends with (its `supports_cuda_graphs` decides graph capture)."""

    def forward(
        self, inputs_embeds: Tensor, positions: Tensor, kv_caches: Sequence[Tensor], meta: AttentionMetadata
    ) -> Tensor: ...

    def fuse_ops(self) -> None:
        """Swaps in fused kernels over the same parameters (same results up to rounding); needs triton."""
