"""Loads a joe student folder (config.json + model.safetensors; the codec comes with the voice)."""
from __future__ import annotations

from pathlib import Path

from model.attention import get_attention_backend
from model.config import ModelConfig
from model.families.base import PromptFrontend
from model.families.joe.family import JoeFamily
from model.families.joe.student import read_config


def load_family(path: Path, config: ModelConfig) -> JoeFamily:
    attention = get_attention_backend(config.resolved_attention_backend)
    return JoeFamily.from_folder(path, attention, config.torch_device, config.torch_dtype, config.max_model_len,
                                 codec=config.codec or "istft", bf16_rows=config.bf16_cpu_rows)


def load_frontend(path: Path, model_name: str, config: ModelConfig) -> PromptFrontend:
    # NOTE: imported here so that the engine core process, which never prepares prompts, does not
    # load piper and espeak.
    from model.families.joe.prompt import JoePromptFrontend

    return JoePromptFrontend(read_config(path), model_name)
