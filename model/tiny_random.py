"""`tiny-random`: a seeded, Orpheus-shaped model small enough for tests and CPU benchmarks.

It is a ~5 M parameter Llama with the Orpheus token layout (over a 256-byte text vocabulary)
plus a small SNAC-shaped codec, both with random weights. It produces noise, not speech: it
exists so the whole serving path runs with no download. The files are written in the real
on-disk formats (config.json + model.safetensors + tokenizer.json; SNAC config.json +
pytorch_model.bin) on first use and cached, never committed.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from safetensors.torch import save_file
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors

from model.codecs.snac import save_random_snac, tiny_snac_config
from model.families.orpheus.layout import ENGLISH_VOICES, FRAME_TOKENS
from model.llama.random_weights import random_llama_weights
from model.paths import cache_root

VERSION = "v1"
SEED = 1234
BOS, EOT = "<|begin_of_text|>", "<|eot_id|>"
SPECIAL_BASE = 264  # 256 byte tokens, BOS, EOT, and room to spare, like Llama 3's gap
CODEBOOK_SIZE = 1024

LLAMA_SHAPE = dict(
    hidden_size=256,
    intermediate_size=704,
    num_hidden_layers=4,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=8192,
    rope_theta=500000.0,
    rope_scaling=dict(
        rope_type="llama3",
        factor=8.0,
        low_freq_factor=1.0,
        high_freq_factor=4.0,
        original_max_position_embeddings=2048,
    ),
    rms_norm_eps=1e-5,
    tie_word_embeddings=True,
)


def ensure_tiny_random(root: Path | None = None) -> Path:
    """Returns the model folder, writing it first if it does not exist yet. Writing goes to a
    temporary sibling that is renamed into place, so concurrent first uses never see half a model."""
    folder = (root or cache_root()) / f"tiny-random-{VERSION}"
    if (folder / "codec" / "config.json").is_file():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=folder.name + ".", dir=folder.parent))
    try:
        write_tiny_random(staging)
        os.replace(staging, folder)
    except OSError:
        if not (folder / "codec" / "config.json").is_file():
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder


def write_tiny_random(folder: Path) -> None:
    vocab_size = SPECIAL_BASE + 10 + FRAME_TOKENS * CODEBOOK_SIZE
    tokenizer = byte_level_tokenizer()
    tokenizer.save(str(folder / "tokenizer.json"))
    config = dict(
        architectures=["LlamaForCausalLM"],
        model_type="llama",
        vocab_size=vocab_size,
        bos_token_id=tokenizer.token_to_id(BOS),
        eos_token_id=SPECIAL_BASE + 2,
        torch_dtype="float32",
        chorus=dict(
            family="orpheus",
            special_base=SPECIAL_BASE,
            codebook_size=CODEBOOK_SIZE,
            eot_id=tokenizer.token_to_id(EOT),
            voices=list(ENGLISH_VOICES),
            note="random weights: produces noise, not speech",
        ),
        **LLAMA_SHAPE,
    )
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    shape = LLAMA_SHAPE
    weights = random_llama_weights(
        vocab_size=vocab_size,
        hidden_size=shape["hidden_size"],
        intermediate_size=shape["intermediate_size"],
        num_hidden_layers=shape["num_hidden_layers"],
        num_key_value_heads=shape["num_key_value_heads"],
        head_dim=shape["hidden_size"] // shape["num_attention_heads"],
        seed=SEED,
    )
    save_file(weights, str(folder / "model.safetensors"))
    codec = tiny_snac_config()
    assert codec.codebook_size == CODEBOOK_SIZE, "the LM vocabulary is laid out for this codebook"
    save_random_snac(folder / "codec", codec, seed=SEED)


def byte_level_tokenizer() -> Tokenizer:
    """A byte-level BPE with no merges: every UTF-8 byte is one token, BOS is prepended."""
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {ch: i for i, ch in enumerate(sorted(alphabet))}
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens([BOS, EOT])
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", special_tokens=[(BOS, tokenizer.token_to_id(BOS))]
    )
    return tokenizer
