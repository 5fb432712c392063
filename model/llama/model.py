"""The Llama decoder over a flat token batch with a paged KV cache, and its Hugging Face weight mapping."""
from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from model.attention import AttentionBackend, AttentionMetadata
from model.backbone import KVSpec
from model.llama.config import LlamaArchConfig
from model.llama.layers import LlamaDecoderLayer, RMSNorm, RotaryEmbedding


class LlamaModel(nn.Module):
    """A Llama decoder with LM head, and a `Backbone` (model/backbone.py); ``forward`` maps a flat batch of T
    token embeddings at absolute positions to T final-normed hidden states, writing every layer's new
    keys/values into ``kv_caches[layer]``. Every layer attends with the same backend.

    With ``tie_word_embeddings`` the LM head is the embedding matrix itself and no ``lm_head`` parameter exists.
    """

    def __init__(self, config: LlamaArchConfig, attention: AttentionBackend) -> None:
        super().__init__()
        self.config = config
        self.rotary = RotaryEmbedding(config.head_dim, config.max_position_embeddings, config.rope_theta,
                                      config.rope_scaling)
        self.embedding = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(
            LlamaDecoderLayer(config, attention, self.rotary) for _ in range(config.num_hidden_layers)
        )
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.lm_head = None if config.tie_word_embeddings else nn.Linear(
            config.hidden_size, config.vocab_size, bias=False
        )

    @property
    def kv_spec(self) -> KVSpec:
        return KVSpec(self.config.num_hidden_layers, self.config.num_key_value_heads, self.config.head_dim)

    @property
    def hidden_size(self) -> int:
        return self.config.hidden_size

    @property
    def dtype(self) -> torch.dtype:
        return self.embedding.weight.dtype

    @property
    def device(self) -> torch.device:
        return self.embedding.weight.device

    @property
    def attention_backend(self) -> AttentionBackend:
        return self.layers[0].self_attn.attention

    @attention_backend.setter
    def attention_backend(self, backend: AttentionBackend) -> None:
        for layer in self.layers:
            layer.self_attn.attention = backend

    def fuse_ops(self) -> None:
        from model.llama.fused import fuse_decoder_layers  # NOTE: imports triton, absent on some CPU installs

        fuse_decoder_layers(self.layers)

    def embed_tokens(self, input_ids: Tensor) -> Tensor:
        return self.embedding(input_ids)

    def forward(self, inputs_embeds: Tensor, positions: Tensor, kv_caches: Sequence[Tensor],
                meta: AttentionMetadata) -> Tensor:
        if len(kv_caches) != len(self.layers):
            raise ValueError(f"expected {len(self.layers)} KV caches, got {len(kv_caches)}")
        hidden = inputs_embeds
        for layer, kv_cache in zip(self.layers, kv_caches):
            hidden = layer(hidden, positions, kv_cache, meta)
        return self.norm(hidden)

    def compute_logits(self, hidden: Tensor) -> Tensor:
        head = self.embedding.weight if self.lm_head is None else self.lm_head.weight
        return F.linear(hidden, head).float()

    def load_weights(self, weights: Iterable[tuple[str, Tensor]]) -> None:
        # NOTE: some tied checkpoints still store a copy of the embedding as lm_head; it carries nothing new.
        skip = ("lm_head.weight",) if self.lm_head is None else ()
        copy_weights(self.checkpoint_destinations(), weights, skip)

    def checkpoint_destinations(self) -> dict[str, Tensor]:
        destinations = {"model.embed_tokens.weight": self.embedding.weight, "model.norm.weight": self.norm.weight}
        if self.lm_head is not None:
            destinations["lm_head.weight"] = self.lm_head.weight
        for index, layer in enumerate(self.layers):
            destinations.update(layer_destinations(layer, f"model.layers.{index}."))
        return destinations


def layer_destinations(layer: LlamaDecoderLayer, prefix: str) -> dict[str, Tensor]:
    """Hugging Face names of one decoder layer's weights (under `prefix`) → the parameter, or the
    rows of a fused parameter, each is loaded into."""
    attention = layer.self_attn
    q_rows, k_rows, v_rows = attention.qkv_proj.weight.split(attention.qkv_sizes)
    gate_rows, up_rows = layer.mlp.gate_up_proj.weight.chunk(2)
    destinations = {
        prefix + "self_attn.q_proj.weight": q_rows,
        prefix + "self_attn.k_proj.weight": k_rows,
        prefix + "self_attn.v_proj.weight": v_rows,
        prefix + "self_attn.o_proj.weight": attention.o_proj.weight,
        prefix + "mlp.gate_proj.weight": gate_rows,
        prefix + "mlp.up_proj.weight": up_rows,
        prefix + "mlp.down_proj.weight": layer.mlp.down_proj.weight,
        prefix + "input_layernorm.weight": layer.input_layernorm.weight,
        prefix + "post_attention_layernorm.weight": layer.post_attention_layernorm.weight,
    }
    if attention.q_norm is not None:
        destinations[prefix + "self_attn.q_norm.weight"] = attention.q_norm.weight
        destinations[prefix + "self_attn.k_norm.weight"] = attention.k_norm.weight
    return destinations


@torch.no_grad()
def copy_weights(destinations: dict[str, Tensor], weights: Iterable[tuple[str, Tensor]],
                 skip: Sequence[str] = ()) -> None:
    """Copies each named weight into its destination; refuses unknown names (other than `skip`),
    wrong shapes, a name given twice and any destination left unset."""
    destinations = dict(destinations)
    for name, tensor in weights:
        if name in skip:
            continue
        destination = destinations.pop(name, None)
        if destination is None:
            raise ValueError(f"unexpected weight {name!r} (unknown to this architecture or given twice)")
        if destination.shape != tensor.shape:
            raise ValueError(f"weight {name!r} has shape {tuple(tensor.shape)}, expected {tuple(destination.shape)}")
        destination.copy_(tensor)
    if destinations:
        raise ValueError(f"checkpoint lacks {len(destinations)} weights, e.g. {sorted(destinations)[:3]}")
