"""Resolves a model name or folder and builds its family (core process) or frontend (API)
through the family registry (model/registry.py)."""
from __future__ import annotations

from pathlib import Path

from model.config import ModelConfig
from model.families.base import PromptFrontend, SpeechFamily
from model.families.joe.student import SHIPPED_WEIGHTS
from model.registry import family_loader

# joe: the built-in English voice (weights in the repo); tiny-random: a random Orpheus-shaped
# model for tests; tiny-random-qwen3 (-base): random Qwen3-TTS custom-voice (base) checkpoints in
# the Hugging Face layout; random-qwen3-0.6b / -1.7b: random ones at the released CustomVoice
# checkpoints' sizes, for benchmarks where nothing downloads. The random ones are written on first use.
QWEN3_RANDOM = ("random-qwen3-0.6b", "random-qwen3-1.7b")
BUILTIN_MODELS = ("joe", "tiny-random", "tiny-random-qwen3", "tiny-random-qwen3-base", *QWEN3_RANDOM)


def resolve_model_path(model: str) -> Path:
    if model == "joe":
        return SHIPPED_WEIGHTS
    if model == "tiny-random":
        from model.tiny_random import ensure_tiny_random

        return ensure_tiny_random()
    if model in ("tiny-random-qwen3", "tiny-random-qwen3-base"):
        from model.families.qwen3_tts.tiny_random import ensure_tiny_qwen3

        return ensure_tiny_qwen3(base=model.endswith("-base"))
    if model in QWEN3_RANDOM:
        from model.families.qwen3_tts.release_shapes import RELEASE_SHAPES
        from model.families.qwen3_tts.tiny_random import ensure_random_qwen3

        return ensure_random_qwen3(RELEASE_SHAPES[model])
    path = Path(model).expanduser()
    if not (path / "config.json").is_file():
        raise FileNotFoundError(
            f"model {model!r} is neither a built-in ({', '.join(BUILTIN_MODELS)}) nor a folder "
            "with config.json"
        )
    return path


def model_name(config: ModelConfig) -> str:
    return config.model if config.model in BUILTIN_MODELS else Path(config.model).name


def load_frontend(config: ModelConfig) -> PromptFrontend:
    path = resolve_model_path(config.model)
    return family_loader(path).load_frontend(path, model_name(config), config)


def load_family(config: ModelConfig) -> SpeechFamily:
    path = resolve_model_path(config.model)
    return family_loader(path).load_family(path, config)
