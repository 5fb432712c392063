"""The model families Chorus serves, keyed by `chorus.family` in a checkpoint's config.json.

A Chorus checkpoint names its family as `"chorus": {"family": ...}`; an upstream checkpoint has
no chorus section: its `model_type` names it (`qwen3_tts`), or it is Orpheus. Each family has one loading module that builds
its `SpeechFamily` (engine core) and its `PromptFrontend` (API process). A module is imported only
when a checkpoint of its family is served, so an Orpheus server never loads piper or onnxruntime.
"""
from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Protocol, cast

from model.config import ModelConfig
from model.families.base import PromptFrontend, SpeechFamily

DEFAULT_FAMILY = "orpheus"
FAMILIES = {
    "orpheus": "model.families.orpheus.loading",
    "joe": "model.families.joe.loading",
    "qwen3_tts": "model.families.qwen3_tts.loading",
}
# An upstream checkpoint's config.json `model_type` → its family (those have no chorus section).
UPSTREAM_MODEL_TYPES = {"qwen3_tts": "qwen3_tts"}


class FamilyLoader(Protocol):
    """What a family's loading module provides; `path` is the checkpoint folder."""

    def load_family(self, path: Path, config: ModelConfig) -> SpeechFamily: ...

    def load_frontend(self, path: Path, model_name: str, config: ModelConfig) -> PromptFrontend: ...


def read_chorus_section(model_path: Path) -> dict:
    """Chorus-specific keys of config.json (absent in upstream checkpoints: empty)."""
    return json.loads((model_path / "config.json").read_text()).get("chorus", {})


def family_name(model_path: Path) -> str:
    config = json.loads((model_path / "config.json").read_text())
    upstream = UPSTREAM_MODEL_TYPES.get(config.get("model_type", ""), DEFAULT_FAMILY)
    name = config.get("chorus", {}).get("family", upstream)
    if name not in FAMILIES:
        raise ValueError(
            f"unsupported model family {name!r} in {model_path / 'config.json'} "
            f"(known: {', '.join(FAMILIES)})"
        )
    return name


def family_loader(model_path: Path) -> FamilyLoader:
    return cast(FamilyLoader, importlib.import_module(FAMILIES[family_name(model_path)]))
