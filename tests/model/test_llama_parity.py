"""LlamaModel over a paged cache against Hugging Face's LlamaForCausalLM on whole sequences."""
from __future__ import annotations

import random

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

from model.attention import AttentionMetadata, get_attention_backend
from model.llama import LlamaArchConfig, LlamaModel, load_llama, read_llama_config
from model.llama.layers import RotaryEmbedding

LLAMA3_SCALING = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                  "original_max_position_embeddings": 16}
VARIANTS = {
    "tied_llama3": dict(num_hidden_layers=2, num_key_value_heads=2, tie_word_embeddings=True,
                        rope_scaling=LLAMA3_SCALING),
    "untied_sharded": dict(num_hidden_layers=3, num_key_value_heads=1, head_dim=24, tie_word_embeddings=False,
                           rope_theta=500000.0),
}


def hf_config(**overrides) -> LlamaConfig:
    return LlamaConfig(vocab_size=300, hidden_size=64, intermediate_size=96, num_attention_heads=4,
                       max_position_embeddings=128, rms_norm_eps=1e-5, initializer_range=0.3, **overrides)


@pytest.fixture(scope="module", params=list(VARIANTS))
def checkpoint(request, tmp_path_factory):
    torch.manual_seed(0)
    hf = LlamaForCausalLM(hf_config(**VARIANTS[request.param])).eval()
    with torch.no_grad():
        for name, param in hf.named_parameters():
            if name.endswith("norm.weight"):
                param.uniform_(0.5, 1.5)
    folder = tmp_path_factory.mktemp(request.param)
    shard_size = "40KB" if request.param == "untied_sharded" else "1GB"
    hf.save_pretrained(folder, safe_serialization=True, max_shard_size=shard_size)
    return hf, folder


def run_interleaved_steps(model: LlamaModel, sequences: list[torch.Tensor], prompt_lens: list[int],
                          block_size: int, seed: int) -> list[torch.Tensor]:
    """Feed every sequence through shared steps, the way the engine does: a sequence arrives at step i, its
    prompt goes in chunks of random size, then one token per step; sequences are shuffled within a step and
    blocks are taken from a shuffled free list as sequences grow. Returns the logits of every position."""
    rng = random.Random(seed)
    config = model.config
    num_blocks = sum(-(-len(s) // block_size) for s in sequences) + 2
    free_blocks = list(range(num_blocks))
    rng.shuffle(free_blocks)
    cache_shape = (2, num_blocks, block_size, config.num_key_value_heads, config.head_dim)
    dtype = model.embedding.weight.dtype
    # Finite but large stale values: any slot read past a sequence shows up in the logits.
    kv_caches = [torch.full(cache_shape, 50.0, dtype=dtype) for _ in range(config.num_hidden_layers)]
    computed = [0] * len(sequences)
    tables: list[list[int]] = [[] for _ in sequences]
    logits: list[list[torch.Tensor]] = [[] for _ in sequences]
    step = 0
    while any(done < len(seq) for done, seq in zip(computed, sequences)):
        batch = []
        for i, seq in enumerate(sequences[: step + 1]):
            prompt_left = prompt_lens[i] - computed[i]
            if computed[i] < len(seq):
                batch.append((i, min(rng.choice([1, 2, 3, 5, 8]), prompt_left) if prompt_left > 0 else 1))
        rng.shuffle(batch)
        for i, count in batch:
            while len(tables[i]) * block_size < computed[i] + count:
                tables[i].append(free_blocks.pop())
        meta = AttentionMetadata.build([count for _, count in batch], [computed[i] for i, _ in batch],
                                       [tables[i] for i, _ in batch], block_size)
        input_ids = torch.cat([sequences[i][computed[i]:computed[i] + count] for i, count in batch])
        positions = torch.cat([torch.arange(computed[i], computed[i] + count) for i, count in batch])
        with torch.no_grad():
            hidden = model(model.embed_tokens(input_ids), positions, kv_caches, meta)
            step_logits = model.compute_logits(hidden).split([count for _, count in batch])
        for (i, count), seq_logits in zip(batch, step_logits):
            logits[i].append(seq_logits)
            computed[i] += count
        step += 1
    return [torch.cat(chunks) for chunks in logits]


@pytest.mark.parametrize("block_size", [4, 16])
def test_chunked_paged_logits_match_hf_full_forward(checkpoint, block_size):
    hf, folder = checkpoint
    model = load_llama(folder, get_attention_backend("torch"))
    gen = torch.Generator().manual_seed(block_size)
    lengths, prompt_lens = [26, 14, 33, 17, 9], [19, 6, 27, 11, 2]
    sequences = [torch.randint(0, 300, (n,), generator=gen) for n in lengths]
    paged_logits = run_interleaved_steps(model, sequences, prompt_lens, block_size, seed=block_size)
    for seq, got in zip(sequences, paged_logits):
        with torch.no_grad():
            expected = hf(seq[None]).logits[0]
        assert got.dtype == torch.float32 and got.shape == expected.shape
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)


def test_bfloat16_load_keeps_dtype_and_tracks_float32(checkpoint):
    hf, folder = checkpoint
    model = load_llama(folder, get_attention_backend("torch"), dtype=torch.bfloat16)
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}
    sequence = torch.arange(20) * 7 % 300
    got = run_interleaved_steps(model, [sequence], [12], block_size=8, seed=0)[0]
    with torch.no_grad():
        expected = hf(sequence[None]).logits[0]
    assert got.dtype == torch.float32
    assert (got - expected).abs().mean() < 0.05 * expected.abs().mean()


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_rotary_tables_match_hf_beyond_initial_length(variant):
    hf_cfg = hf_config(**VARIANTS[variant])
    config = LlamaArchConfig.from_hf_dict(hf_cfg.to_dict())
    positions = torch.arange(300)
    hf_cos, hf_sin = LlamaRotaryEmbedding(hf_cfg)(torch.zeros(1, dtype=torch.float32), positions[None])
    rotary = RotaryEmbedding(config.head_dim, config.max_position_embeddings, config.rope_theta,
                             config.rope_scaling)
    query = torch.randn(300, 1, config.head_dim)
    rotated, _ = rotary.apply(positions, query, query, num_positions=300)
    half = config.head_dim // 2
    rotated_half = torch.cat((-query[..., half:], query[..., :half]), dim=-1)
    expected = query * hf_cos[0, :, None] + rotated_half * hf_sin[0, :, None]
    torch.testing.assert_close(rotated, expected, rtol=1e-5, atol=1e-5)


def test_llama3_scaling_changes_the_rotation():
    plain = RotaryEmbedding(16, 64, 10000.0, None)
    scaled = RotaryEmbedding(16, 64, 10000.0, LlamaArchConfig.from_hf_dict(
        hf_config(rope_scaling=LLAMA3_SCALING).to_dict()).rope_scaling)
    x = torch.randn(40, 1, 16)
    positions = torch.arange(40)
    assert (plain.apply(positions, x, x, 40)[0] - scaled.apply(positions, x, x, 40)[0]).abs().max() > 0.1


def test_config_from_older_hf_dict():
    config = LlamaArchConfig.from_hf_dict({
        "vocab_size": 500, "hidden_size": 96, "intermediate_size": 256, "num_hidden_layers": 2,
        "num_attention_heads": 6, "rope_theta": 500000.0, "bos_token_id": 7,
        "rope_scaling": {"type": "llama3", "factor": 32, "low_freq_factor": 1, "high_freq_factor": 4,
                         "original_max_position_embeddings": 8192},
    })
    assert config.num_key_value_heads == 6 and config.head_dim == 16
    assert config.rope_theta == 500000.0 and config.max_position_embeddings == 2048
    assert config.rope_scaling == {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                                   "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
    assert config.extra == {"bos_token_id": 7}
    assert not config.tie_word_embeddings and config.rms_norm_eps == 1e-6


def test_config_reads_transformers5_rope_parameters(checkpoint):
    hf, folder = checkpoint
    config = read_llama_config(folder)
    assert config.num_key_value_heads == hf.config.num_key_value_heads
    assert config.head_dim == hf.config.head_dim
    assert config.rope_theta == hf.config.rope_parameters["rope_theta"]
    assert (config.rope_scaling is None) == (hf.config.rope_parameters["rope_type"] == "default")


@pytest.mark.parametrize("override", [
    {"hidden_act": "gelu"}, {"attention_bias": True}, {"rope_scaling": {"rope_type": "yarn", "factor": 2.0}},
    {"rope_scaling": {"rope_type": "llama3", "factor": 8.0}}, {"num_key_value_heads": 3},
])
def test_config_rejects_unsupported_variants(override):
    base = {"vocab_size": 10, "hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1,
            "num_attention_heads": 4}
    with pytest.raises(ValueError):
        LlamaArchConfig.from_hf_dict({**base, **override})


def test_load_weights_rejects_unknown_missing_and_misshapen(checkpoint):
    hf, _ = checkpoint
    config = LlamaArchConfig.from_hf_dict(hf.config.to_dict())
    model = LlamaModel(config, get_attention_backend("torch"))
    state = {k: v for k, v in hf.state_dict().items() if not (config.tie_word_embeddings and k == "lm_head.weight")}
    with pytest.raises(ValueError, match="unexpected"):
        model.load_weights([*state.items(), ("model.layers.0.self_attn.rotary.bogus", torch.zeros(1))])
    missing = dict(state)
    missing.pop("model.layers.1.mlp.up_proj.weight")
    with pytest.raises(ValueError, match="lacks"):
        model.load_weights(missing.items())
    misshapen = dict(state)
    misshapen["model.norm.weight"] = torch.ones(3)
    with pytest.raises(ValueError, match="shape"):
        model.load_weights(misshapen.items())
