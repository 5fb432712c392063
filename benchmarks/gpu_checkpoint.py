"""Random-weight checkpoints of a given Llama shape, in the on-disk format the loader reads (config.json with a
"chorus" section + model.safetensors + a SNAC folder), for benchmarks that may not download real weights."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from safetensors.torch import save_file

from model.codecs.snac import SnacConfig, save_random_snac, tiny_snac_config
from model.families.orpheus.layout import ENGLISH_VOICES
from model.llama.random_weights import random_llama_weights


@dataclass(slots=True, frozen=True)
class LlamaShape:
    """The architecture fields of a Llama config.json; `special_base` is where Orpheus' special tokens start
    (audio tokens follow them, 7 codebooks of `codebook_size`), so vocab_size must leave room for them."""

    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    vocab_size: int
    special_base: int
    codebook_size: int

    def __post_init__(self) -> None:
        if self.hidden_size % self.num_attention_heads or self.num_attention_heads % self.num_key_value_heads:
            raise ValueError("heads must divide hidden_size and KV heads must divide heads")
        if self.vocab_size < self.special_base + 10 + 7 * self.codebook_size:
            raise ValueError("vocab_size leaves no room for the audio tokens")

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads


# MODELS.md: Orpheus 3B (llama3 rope scaling, tied embeddings).
ORPHEUS_3B = LlamaShape(3072, 8192, 28, 24, 8, 156940, 128256, 4096)
TINY = LlamaShape(128, 256, 2, 4, 2, 264 + 10 + 7 * 1024, 264, 1024)
ROPE = dict(rope_theta=500000.0, rope_scaling=dict(rope_type="llama3", factor=32.0, low_freq_factor=1.0,
                                                   high_freq_factor=4.0, original_max_position_embeddings=8192))


def write_random_checkpoint(folder: Path, shape: LlamaShape, device: torch.device, seed: int = 0) -> Path:
    """Writes the model (bf16 weights drawn on `device`, which is fast on a GPU) and a SNAC codec of the
    matching codebook size (the real 24 kHz config for 4096 codes, the tiny test codec otherwise)."""
    folder.mkdir(parents=True, exist_ok=True)
    config = dict(
        architectures=["LlamaForCausalLM"], model_type="llama", torch_dtype="bfloat16",
        bos_token_id=shape.special_base - 256 if shape.special_base >= 256 else 0,
        eos_token_id=shape.special_base + 2, max_position_embeddings=8192, rms_norm_eps=1e-5,
        tie_word_embeddings=True, head_dim=shape.head_dim,
        **{k: v for k, v in asdict(shape).items() if k not in ("special_base", "codebook_size")}, **ROPE,
        chorus=dict(family="orpheus", special_base=shape.special_base, codebook_size=shape.codebook_size,
                    eot_id=shape.special_base - 247, voices=list(ENGLISH_VOICES),
                    note="random weights: produces noise, not speech"),
    )
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    weights = random_llama_weights(
        vocab_size=shape.vocab_size,
        hidden_size=shape.hidden_size,
        intermediate_size=shape.intermediate_size,
        num_hidden_layers=shape.num_hidden_layers,
        num_key_value_heads=shape.num_key_value_heads,
        head_dim=shape.head_dim,
        seed=seed,
        device=device,
        dtype=torch.bfloat16,
    )
    save_file(weights, str(folder / "model.safetensors"))
    codec = SnacConfig() if shape.codebook_size == 4096 else tiny_snac_config()
    save_random_snac(folder / "codec", codec, seed=seed)
    return folder
