"""The attention backend interface and the registry of available backends."""
from __future__ import annotations

import importlib
from abc import ABC, abstractmethod

from torch import Tensor

from model.attention.metadata import AttentionMetadata

# NOTE: backends are named by module path and imported on demand, so a GPU-only backend never has to be
# importable on a machine that only asks for the reference one.
_BACKENDS: dict[str, tuple[str, str]] = {
    "torch": ("model.attention.torch_ref", "TorchReferenceBackend"),
    "triton": ("model.attention.triton_backend", "TritonBackend"),
    "xformers": ("model.attention.xformers_backend", "XformersPrefillBackend"),
}


class AttentionBackend(ABC):
    """Paged causal attention over a flat batch: query [T, H, D], key/value [T, KVH, D] -> output [T, H, D].

    ``forward`` first writes the new keys/values into ``kv_cache`` at ``meta.slot_mapping`` and then lets every
    new token attend to its own sequence's cached keys at positions 0..its own position. The cache of one layer
    is ``[2, num_blocks, block_size, num_kv_heads, head_dim]`` (index 0 = K, 1 = V); query heads are a multiple
    of key/value heads (GQA), query head h reads key/value head ``h // (H // KVH)``.
    """

    name: str
    # True when forward reads only the tensors of its metadata (never its python lists or maxima) and allocates
    # nothing whose shape depends on them, so a decode step can be captured once and replayed as a CUDA graph.
    supports_cuda_graphs: bool = False

    @abstractmethod
    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        kv_cache: Tensor,
        meta: AttentionMetadata,
        scale: float,
    ) -> Tensor:
        ...


def get_attention_backend(name: str) -> AttentionBackend:
    if name not in _BACKENDS:
        raise ValueError(f"unknown attention backend {name!r}; available: {', '.join(sorted(_BACKENDS))}")
    module_name, class_name = _BACKENDS[name]
    return getattr(importlib.import_module(module_name), class_name)()
