"""The Llama decoder over a flat token batch with a paged KV cache, and its Hugging Face weight mapping."""
from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from model.attention import AttentionBackend, AttentionMetadata
from model.llama.config import LlamaArchConfig
from model.llama.layers import LlamaAttention, LlamaMLP, RMSNorm, RotaryEmbedding


class LlamaDecoderLayer(nn.Module):
    """Pre-norm residual block: x + attn(norm(x)), then h + mlp(norm(h))."""

    def __init__(self, config: LlamaArchConfig, attention: AttentionBackend, rotary: RotaryEmbedding) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.self_attn = LlamaAttention(config, attention, rotary)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.mlp = LlamaMLP(config.hidden_size, config.intermediate_size)

    def forward(self, hidden: Tensor, positions: Tensor, kv_cache: Tensor, meta: AttentionMetadata) -> Tensor:
        hidden = hidden + self.self_attn(self.input_layernorm(hidden), positions, kv_cache, meta)
        return hidden + self.mlp(self.post_attention_layernorm(hidden))


class LlamaModel(nn.Module):
    """A Llama decoder with LM head; ``forward`` maps a flat batch of T token embeddings at absolute positions
    to T final-normed hidden states, writing every layer's new keys/values into ``kv_caches[layer]``.

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

    @torch.no_grad()
    def load_weights(self, weights: Iterable[tuple[str, Tensor]]) -> None:
        destinations = self._checkpoint_destinations()
        for name, tensor in weights:
            # NOTE: some tied checkpoints still store a copy of the embedding as lm_head; it carries nothing new.
            if name == "lm_head.weight" and self.lm_head is None:
                continue
            destination = destinations.pop(name, None)
            if destination is None:
                raise ValueError(f"unexpected weight {name!r} (unknown to this architecture or given twice)")
            if destination.shape != tensor.shape:
                raise ValueError(f"weight {name!r} has shape {tuple(tensor.shape)}, "
                                 f"expected {tuple(destination.shape)}")
            destination.copy_(tensor)
        if destinations:
            raise ValueError(f"checkpoint lacks {len(destinations)} weights, e.g. {sorted(destinations)[:3]}")

    def _checkpoint_destinations(self) -> dict[str, Tensor]:
        destinations = {"model.embed_tokens.weight": self.embedding.weight, "model.norm.weight": self.norm.weight}
        if self.lm_head is not None:
            destinations["lm_head.weight"] = self.lm_head.weight
        for index, layer in enumerate(self.layers):
            prefix = f"model.layers.{index}."
            q_rows, k_rows, v_rows = layer.self_attn.qkv_proj.weight.split(layer.self_attn.qkv_sizes)
            gate_rows, up_rows = layer.mlp.gate_up_proj.weight.chunk(2)
            destinations.update({
                prefix + "self_attn.q_proj.weight": q_rows,
                prefix + "self_attn.k_proj.weight": k_rows,
                prefix + "self_attn.v_proj.weight": v_rows,
                prefix + "self_attn.o_proj.weight": layer.self_attn.o_proj.weight,
                prefix + "mlp.gate_proj.weight": gate_rows,
                prefix + "mlp.up_proj.weight": up_rows,
                prefix + "mlp.down_proj.weight": layer.mlp.down_proj.weight,
                prefix + "input_layernorm.weight": layer.input_layernorm.weight,
                prefix + "post_attention_layernorm.weight": layer.post_attention_layernorm.weight,
            })
        return destinations
