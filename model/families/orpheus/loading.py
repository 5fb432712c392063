"""Loads an Orpheus checkpoint folder (Llama weights, tokenizer, a SNAC codec folder)."""
from __future__ import annotations

from pathlib import Path

from model.attention import get_attention_backend
from model.codecs.snac import SnacDecoder
from model.codecs.snac_frames import SnacFrameCodec
from model.config import ModelConfig
from model.families.orpheus.family import OrpheusFamily
from model.families.orpheus.frontend import OrpheusFrontend
from model.families.orpheus.layout import OrpheusTokenLayout
from model.llama.loader import load_llama
from model.registry import read_chorus_section

DEFAULT_MAX_MODEL_LEN = 8192


def resolve_codec_path(model_path: Path, codec: str | None) -> Path:
    """`--codec` when given, else a `codec/` folder inside the model folder."""
    path = Path(codec).expanduser() if codec else model_path / "codec"
    if not (path / "config.json").is_file():
        raise FileNotFoundError(
            f"no codec at {path}: pass --codec with a SNAC folder (config.json + pytorch_model.bin)"
        )
    return path


def load_family(path: Path, config: ModelConfig) -> OrpheusFamily:
    device, dtype = config.torch_device, config.torch_dtype
    backbone = load_llama(path, get_attention_backend(config.resolved_attention_backend), dtype, device)
    snac = SnacDecoder.from_pretrained(resolve_codec_path(path, config.codec), device=device)
    snac.noise = config.codec_noise
    max_len = config.max_model_len or min(
        backbone.config.max_position_embeddings, DEFAULT_MAX_MODEL_LEN
    )
    return OrpheusFamily(
        backbone,
        SnacFrameCodec(snac),
        OrpheusTokenLayout.from_config(read_chorus_section(path)),
        max_model_len=max_len,
        constrain_audio_tokens=config.constrain_audio_tokens,
    )


def load_frontend(path: Path, model_name: str, config: ModelConfig) -> OrpheusFrontend:
    return OrpheusFrontend.from_folder(model_name, path, read_chorus_section(path))
