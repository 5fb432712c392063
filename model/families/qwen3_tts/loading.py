"""Loads a Qwen3-TTS checkpoint folder in the Hugging Face layout (config.json, safetensors, text
tokenizer files, generation_config.json) and its 12 Hz codec (`speech_tokenizer/`, or `--codec`)."""
from __future__ import annotations

from pathlib import Path

import torch

from model.attention import get_attention_backend
from model.codecs.qwen3_12hz import Qwen3Codec12Hz
from model.config import ModelConfig
from model.families.qwen3_tts.config import CODEC_FOLDER, Qwen3TtsConfig
from model.families.qwen3_tts.depth import PREDICTOR, CodePredictor
from model.families.qwen3_tts.family import Qwen3Family
from model.families.qwen3_tts.frontend import Qwen3Frontend
from model.families.qwen3_tts.talker import build_talker, load_talker_weights
from model.llama.loader import checkpoint_weights

DEFAULT_MAX_MODEL_LEN = 8192
# Weights the engine does not run: the speaker encoder (x-vectors are made where prompts are).
SPEAKER_ENCODER = "speaker_encoder."


def resolve_codec_path(model_path: Path, codec: str | None) -> Path:
    """`--codec` when given, else the `speech_tokenizer/` folder a Qwen3-TTS download carries."""
    path = Path(codec).expanduser() if codec else model_path / CODEC_FOLDER
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"no 12 Hz codec at {path}: pass --codec with the speech_tokenizer folder "
                                "(config.json + model.safetensors) of a Qwen3-TTS-12Hz download")
    return path


def load_family(path: Path, config: ModelConfig) -> Qwen3Family:
    device, dtype = config.torch_device, config.torch_dtype
    qwen3 = Qwen3TtsConfig.load(path)
    backend = config.resolved_attention_backend
    # NOTE: built on the meta device: no memory for a random init the checkpoint overwrites.
    with torch.device("meta"):
        backbone, text = build_talker(qwen3, get_attention_backend(backend))
        # Its own backend instance: the predictor's per-sub-step plans never evict the talker's.
        # Its sub-steps are decode-shaped (at most two positions a row) and captured in the decode
        # graphs: xformers' path is for long prefill blocks and builds its mask from host lists,
        # which a graph cannot capture, so the predictor takes the Triton kernel xformers decodes with.
        predictor = CodePredictor(qwen3, get_attention_backend("triton" if backend == "xformers" else backend))
    modules = [module.to(dtype).to_empty(device=device) for module in (backbone, text, predictor)]
    backbone, text, predictor = modules  # type: ignore[assignment]
    talker_weights, predictor_weights = [], []
    for name, tensor in checkpoint_weights(path):
        if name.startswith(SPEAKER_ENCODER):
            continue
        (predictor_weights if name.startswith(PREDICTOR) else talker_weights).append((name, tensor))
    load_talker_weights(backbone, text, talker_weights)
    predictor.load_weights(predictor_weights)
    codec = Qwen3Codec12Hz.from_folder(resolve_codec_path(path, config.codec), device=device)
    max_len = config.max_model_len or min(qwen3.max_positions, DEFAULT_MAX_MODEL_LEN)
    return Qwen3Family(qwen3, backbone.eval(), text.eval(), predictor.eval(), codec, max_len)


def load_frontend(path: Path, model_name: str, config: ModelConfig) -> Qwen3Frontend:
    return Qwen3Frontend.from_folder(model_name, path, text_split=config.text_split)
