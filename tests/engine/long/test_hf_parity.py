"""The engine's greedy tokens equal transformers' greedy `generate` on a checkpoint loaded
through `--model`, with chunked prefill, concurrency and forced preemption."""
from __future__ import annotations

import json

import pytest
import torch

from capacity.config import CapacityConfig
from engine.config import EngineConfig
from memory.config import CacheConfig
from model.codecs.snac import save_random_snac, tiny_snac_config
from model.config import ModelConfig
from model.families.base import SpeechPrompt
from model.families.orpheus.layout import FRAME_TOKENS
from model.sampling import SamplingParams
from model.tiny_random import SPECIAL_BASE, byte_level_tokenizer
from scheduler.config import SchedulerConfig

from ..conftest import core_on_step_clock, drain, started

transformers = pytest.importorskip("transformers")

MAX_NEW = 24
PROMPT_LENGTHS = [5, 9, 17, 23, 31, 40, 47, 58]


@pytest.fixture(scope="module")
def hf_checkpoint(tmp_path_factory):
    """A tiny random LlamaForCausalLM saved by transformers itself, with a tokenizer built by
    `tokenizers` and a codec folder, i.e. the real on-disk format of an Orpheus checkpoint."""
    path = tmp_path_factory.mktemp("hf-llama")
    codec = tiny_snac_config()
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=SPECIAL_BASE + 10 + FRAME_TOKENS * codec.codebook_size,
        hidden_size=64,
        intermediate_size=160,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        rope_theta=10000.0,
        rope_scaling=dict(
            rope_type="llama3", factor=4.0, low_freq_factor=1.0, high_freq_factor=4.0,
            original_max_position_embeddings=32,
        ),
        tie_word_embeddings=True,
        # Large weights spread the logits, so greedy choices are not decided by rounding.
        initializer_range=0.3,
    )
    model = transformers.LlamaForCausalLM(config).eval()
    model.save_pretrained(path, safe_serialization=True)
    byte_level_tokenizer().save(str(path / "tokenizer.json"))
    cfg = json.loads((path / "config.json").read_text())
    cfg["chorus"] = {"family": "orpheus", "special_base": SPECIAL_BASE, "codebook_size": codec.codebook_size}
    (path / "config.json").write_text(json.dumps(cfg))
    save_random_snac(path / "codec", codec, seed=0)
    return path, model


def prompts(vocab_size: int) -> list[list[int]]:
    gen = torch.Generator().manual_seed(7)
    return [torch.randint(0, vocab_size, (n,), generator=gen).tolist() for n in PROMPT_LENGTHS]


def hf_greedy(model, prompt: list[int], eos: int) -> list[int]:
    with torch.no_grad():
        out = model.generate(
            torch.tensor([prompt]),
            attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
            max_new_tokens=MAX_NEW,
            do_sample=False,
            eos_token_id=eos,
            pad_token_id=eos,
        )
    return out[0, len(prompt):].tolist()


def engine_greedy(path, num_blocks: int, budget: int) -> tuple[list[list[int]], int]:
    config = EngineConfig(
        model=ModelConfig(model=str(path), device="cpu", constrain_audio_tokens=False),
        cache=CacheConfig(block_size=4, num_blocks=num_blocks),
        scheduler=SchedulerConfig(max_num_seqs=8, max_num_batched_tokens=budget),
        # Every prompt added at once (no admission) and stepped every step (no stream sits out):
        # parity of the batching mechanics, whatever the load.
        capacity=CapacityConfig(max_queue_delay=None, skip_slack_seconds=None),
        mode="inproc",
    )
    core = core_on_step_clock(config)
    vocab = core.family.backbone.config.vocab_size
    streams = []
    for i, prompt in enumerate(prompts(vocab)):
        core.add_request(f"p{i}", SpeechPrompt(token_ids=prompt), SamplingParams(temperature=0.0, max_tokens=MAX_NEW))
        streams.append(started(core, f"p{i}").stream)
    chunks = drain(core)
    preemptions = sum(c[-1].metrics.num_preemptions for c in chunks.values())
    assert core.kv_manager.num_free_blocks == num_blocks
    return [s.token_ids[s.prompt_len:] for s in streams], preemptions


@pytest.mark.parametrize("num_blocks, expect_preemption", [(256, False), (24, True)])
def test_engine_greedy_equals_transformers_generate(hf_checkpoint, num_blocks, expect_preemption):
    path, model = hf_checkpoint
    eos = SPECIAL_BASE + 2
    expected = [hf_greedy(model, p, eos) for p in prompts(model.config.vocab_size)]
    # A budget of 16 tokens is smaller than the longest prompt (58): prefill is chunked.
    got, preemptions = engine_greedy(path, num_blocks, budget=16)
    assert (preemptions > 0) == expect_preemption
    assert got == expected
