"""The engine uses a family's decoder only through the `Backbone` protocol (model/backbone.py), and its
output layer only through the family's `head`: checked by serving and profiling a family whose backbone
offers nothing else and whose head is not an LM head, and by reading the engine's source."""
from __future__ import annotations

import ast
from pathlib import Path

import torch

from engine.runner.kv_setup import run_largest_step
from memory.kv_tensors import KVLayout
from model.backbone import Backbone
from scheduler.config import SchedulerConfig

from .test_continuous_family import LATENT, ToyLatentFamily, run

ENGINE = Path(__file__).resolve().parents[2] / "engine"
BACKBONE_MEMBERS = frozenset(name for name in vars(Backbone) if not name.startswith("_"))
# The Llama internals a family may use inside model/, and the engine may not.
LLAMA_INTERNALS = frozenset({"layers", "self_attn", "embed_tokens", "embedding", "compute_logits", "lm_head"})


class ProtocolOnlyBackbone:
    """A decoder's Backbone members and nothing else: reaching for any other attribute raises."""

    def __init__(self, decoder: Backbone) -> None:
        self._decoder = decoder

    def __getattr__(self, name: str):
        if name not in BACKBONE_MEMBERS:
            raise AttributeError(f"{name!r} is not a member of the Backbone protocol")
        return getattr(self._decoder, name)


def protocol_only_family() -> ToyLatentFamily:
    family = ToyLatentFamily()
    family.backbone = ProtocolOnlyBackbone(family.decoder)
    return family


def test_the_engine_serves_a_backbone_that_offers_only_the_protocol():
    frames, audio, _ = run(num_blocks=64, family=protocol_only_family())
    expected_frames, expected_audio, _ = run(num_blocks=64)
    assert frames.keys() == expected_frames.keys()
    for rid, got in frames.items():
        # Bit for bit: on the StepClock both runs order and batch their streams alike.
        torch.testing.assert_close(got, expected_frames[rid], atol=0, rtol=0)
    assert audio["reasons"] == expected_audio["reasons"]


def test_the_profiling_step_runs_the_familys_head_not_an_lm_head():
    family = protocol_only_family()
    spec = family.backbone.kv_spec
    layout = KVLayout(spec.num_layers, spec.num_kv_heads, spec.head_dim, 16, family.backbone.dtype)
    config = SchedulerConfig(max_num_seqs=3, max_num_batched_tokens=40)
    out = run_largest_step(family, config, layout.allocate(3, "cpu"), layout.block_size)
    # ToyLatentFamily's head emits latent frames; an LM head would give [3, vocab_size=64] logits.
    assert out.shape == (3, LATENT)


def engine_sources() -> dict[str, ast.Module]:
    return {str(path.relative_to(ENGINE.parent)): ast.parse(path.read_text()) for path in ENGINE.rglob("*.py")}


def test_the_engine_reads_only_protocol_members_off_a_backbone():
    strays = []
    for path, tree in engine_sources().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and _is_backbone(node.value) and node.attr not in BACKBONE_MEMBERS:
                strays.append(f"{path}:{node.lineno}: backbone.{node.attr}")
    assert not strays


def test_the_engine_never_reaches_into_llama():
    strays = []
    for path, tree in engine_sources().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in LLAMA_INTERNALS:
                strays.append(f"{path}:{node.lineno}: .{node.attr}")
            modules = [alias.name for alias in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            strays += [f"{path}:{node.lineno}: import {m}" for m in modules if m.startswith("model.llama")]
    assert not strays


def _is_backbone(node: ast.expr) -> bool:
    return (isinstance(node, ast.Name) and node.id == "backbone") or (
        isinstance(node, ast.Attribute) and node.attr == "backbone")
