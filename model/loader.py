"""Resolves a model name or folder and builds its family (core process) or frontend (API)."""
from __future__ import annotations

import json
from pathlib import Path

from model.codecs.snac import SnacDecoder
from model.codecs.snac_frames import SnacFrameCodec
from model.config import ModelConfig
from model.families.base import PromptFrontend, SpeechFamily
from model.families.orpheus.family import OrpheusFamily
from model.families.orpheus.frontend import OrpheusFrontend
from model.families.orpheus.layout import OrpheusTokenLayout
from model.llama.loader import load_llama
from model.attention import get_attention_backend
from model.families.joe.student import SHIPPED_WEIGHTS, is_student_folder, read_config

# joe: the built-in English voice (weights in the repo); tiny-random: a random Orpheus-shaped
# model for tests, written on first use.
BUILTIN_MODELS = ("joe", "tiny-random")
DEFAULT_MAX_MODEL_LEN = 8192


def resolve_model_path(model: str) -> Path:
    if model == "joe":
        return SHIPPED_WEIGHTS
    if model == "tiny-random":
        from model.tiny_random import ensure_tiny_random

        return ensure_tiny_random()
    path = Path(model).expanduser()
    if not (path / "config.json").is_file():
        raise FileNotFoundError(
            f"model {model!r} is neither a built-in ({', '.join(BUILTIN_MODELS)}) nor a folder "
            "with config.json"
        )
    return path


def resolve_codec_path(model_path: Path, codec: str | None) -> Path:
    """`--codec` when given, else a `codec/` folder inside the model folder."""
    path = Path(codec).expanduser() if codec else model_path / "codec"
    if not (path / "config.json").is_file():
        raise FileNotFoundError(
            f"no codec at {path}: pass --codec with a SNAC folder (config.json + pytorch_model.bin)"
        )
    return path


def read_chorus_section(model_path: Path) -> dict:
    """Chorus-specific keys of config.json (absent in upstream checkpoints, which get defaults)."""
    config = json.loads((model_path / "config.json").read_text())
    section = config.get("chorus", {})
    family = section.get("family", "orpheus")
    if family != "orpheus":
        raise ValueError(f"unsupported model family {family!r} in {model_path / 'config.json'}")
    return section


def model_name(config: ModelConfig) -> str:
    return config.model if config.model in BUILTIN_MODELS else Path(config.model).name


def load_frontend(config: ModelConfig) -> PromptFrontend:
    path = resolve_model_path(config.model)
    if is_student_folder(path):
        # NOTE: imported here so that serving an Orpheus checkpoint never loads piper or onnxruntime.
        from model.families.joe.prompt import JoePromptFrontend

        return JoePromptFrontend(read_config(path), model_name(config))
    return OrpheusFrontend.from_folder(model_name(config), path, read_chorus_section(path))


def load_family(config: ModelConfig) -> SpeechFamily:
    path = resolve_model_path(config.model)
    device, dtype = config.torch_device, config.torch_dtype
    if is_student_folder(path):
        from model.families.joe.family import JoeFamily

        attention = get_attention_backend(config.resolved_attention_backend)
        return JoeFamily.from_folder(path, attention, device, dtype, config.max_model_len,
                                     codec=config.codec or "istft")
    section = read_chorus_section(path)
    backbone = load_llama(path, get_attention_backend(config.resolved_attention_backend), dtype, device)
    snac = SnacDecoder.from_pretrained(resolve_codec_path(path, config.codec), device=device)
    snac.noise = config.codec_noise
    max_len = config.max_model_len or min(
        backbone.config.max_position_embeddings, DEFAULT_MAX_MODEL_LEN
    )
    return OrpheusFamily(
        backbone,
        SnacFrameCodec(snac),
        OrpheusTokenLayout.from_config(section),
        max_model_len=max_len,
        constrain_audio_tokens=config.constrain_audio_tokens,
    )
