"""The talker: a Qwen3 decoder whose input at each position is a text-track plus a codec-track
embedding, and whose head predicts code 0 of the next frame."""
from __future__ import annotations

import dataclasses
from collections.abc import Iterable

import torch.nn.functional as F
from torch import Tensor, nn

from model.attention import AttentionBackend
from model.families.qwen3_tts.config import Qwen3TtsConfig
from model.llama.config import LlamaArchConfig
from model.llama.model import LlamaModel, copy_weights

TALKER = "talker."


class TextProjection(nn.Module):
    """The text track: a text token's embedding (text_hidden_size) through a two-layer MLP to the
    talker's hidden size."""

    def __init__(self, vocab_size: int, text_hidden: int, hidden: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, text_hidden)
        self.fc1 = nn.Linear(text_hidden, text_hidden)
        self.fc2 = nn.Linear(text_hidden, hidden)

    def forward(self, text_ids: Tensor) -> Tensor:
        return self.fc2(F.silu(self.fc1(self.embedding(text_ids))))

    def destinations(self) -> dict[str, Tensor]:
        return {
            TALKER + "model.text_embedding.weight": self.embedding.weight,
            TALKER + "text_projection.linear_fc1.weight": self.fc1.weight,
            TALKER + "text_projection.linear_fc1.bias": self.fc1.bias,
            TALKER + "text_projection.linear_fc2.weight": self.fc2.weight,
            TALKER + "text_projection.linear_fc2.bias": self.fc2.bias,
        }


def qwen3_arch(shape_dict: dict) -> LlamaArchConfig:
    """A Llama architecture from Hugging Face keys, with Qwen3's per-head query/key norms."""
    return dataclasses.replace(LlamaArchConfig.from_hf_dict(shape_dict), qk_norm=True)


def build_talker(config: Qwen3TtsConfig, attention: AttentionBackend) -> tuple[LlamaModel, TextProjection]:
    """The decoder (as a LlamaModel: its embedding is the talker's codec table, its LM head the
    codec head) and the text track, uninitialised.

    NOTE: the reference rotates with multimodal RoPE over three position ids; for speech every
    position's three ids are equal, and then each frequency pair sees the same angle whichever
    section it belongs to: plain RoPE, which is what the LlamaModel applies."""
    arch = qwen3_arch(config.talker.as_llama_dict(config.talker_vocab_size, config.max_positions))
    backbone = LlamaModel(arch, attention)
    text = TextProjection(config.text_vocab_size, config.text_hidden_size, config.talker.hidden_size)
    return backbone, text


def load_talker_weights(backbone: LlamaModel, text: TextProjection, weights: Iterable[tuple[str, Tensor]]) -> None:
    """Loads the checkpoint's `talker.*` weights except the code predictor's."""
    # The reference's names for the two tables LlamaModel calls embedding and LM head.
    renamed = {"model.embed_tokens.weight": "model.codec_embedding.weight", "lm_head.weight": "codec_head.weight"}
    destinations = {TALKER + renamed.get(name, name): tensor
                    for name, tensor in backbone.checkpoint_destinations().items()}
    destinations.update(text.destinations())
    copy_weights(destinations, weights)
