"""Qwen3-TTS's 12 Hz speech tokenizer, encoding side: a reference clip → frames of codes (the
first `encoder_valid_num_quantizers` of Mimi's split residual quantizer, 16 in the released
checkpoints), read from a speech_tokenizer folder's `encoder.*` tensors.

It runs once per uploaded voice, in prompt preparation, over the whole clip: SEANet convolutions
(24 kHz → 25 Hz), a causal transformer, a stride-2 convolution (→ 12.5 Hz), then the codebook
search. Always in float32: the codes are discrete, and the reference's were made in float32.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

from model.codecs.qwen3_12hz_config import Qwen3EncoderConfig
from model.codecs.qwen3_12hz_encoder_layers import SeanetEncoder, SplitCodebookSearch, downsampler
from model.codecs.qwen3_12hz_encoder_transformer import EncoderTransformer
from model.codecs.qwen3_12hz_weights import WEIGHTS_FILE, codebook_vectors, read_tensors
from model.codecs.resample import encoder_input

_PREFIX = "encoder."
_QUANTIZERS = ("semantic_residual_vector_quantizer", "acoustic_residual_vector_quantizer")
# Mimi keeps each codebook as (embed_sum, cluster_usage, initialized) and divides the first two.
_CODEBOOK_PARTS = ("embed_sum", "cluster_usage", "initialized")
_CODEBOOK_KEY = re.compile(r"quantizer\.\w+\.layers\.\d+\.codebook\.")
_SHOWN_KEYS = 8  # how many names an error lists


class Qwen3EncoderNetwork(nn.Module):
    """The encoder's parameters, path for path the reference's `encoder.*` state dict (the
    codebooks folded, only the valid ones kept): audio [B, 1, n] → codes [B, valid_quantizers,
    ceil(n / samples_per_frame)]."""

    def __init__(self, config: Qwen3EncoderConfig) -> None:
        super().__init__()
        self.config = config
        self.encoder = SeanetEncoder(config)
        self.encoder_transformer = EncoderTransformer(config)
        self.downsample = downsampler(config)
        self.quantizer = SplitCodebookSearch(config)

    def forward(self, audio: Tensor) -> Tensor:
        return self.quantizer(self.downsample(self.encoder_transformer(self.encoder(audio))))

    def checkpoint_keys(self) -> set[str]:
        """The names the reference stores these weights under (less `encoder.`): every codebook
        of both quantizers (the encoder has num_quantizers; only the valid ones are used) and
        their decoding projections, which encoding leaves unread."""
        keys = {key for key in self.state_dict() if not key.endswith(".codebooks")}
        config = self.config
        totals = config.num_semantic_quantizers, config.num_quantizers - config.num_semantic_quantizers
        for name, total in zip(_QUANTIZERS, totals):
            if getattr(self.quantizer, name).input_proj is not None:
                keys.add(f"quantizer.{name}.output_proj.weight")
            keys |= {f"quantizer.{name}.layers.{i}.codebook.{part}" for i in range(total) for part in _CODEBOOK_PARTS}
        return keys


def load_encoder(folder: str | Path, device: torch.device | str = "cpu") -> Qwen3EncoderNetwork:
    """The encoder of a speech_tokenizer folder (config.json, model.safetensors), in float32.
    Raises ValueError when the file holds no encoder weights, or not exactly the reference's."""
    folder = Path(folder)
    config = Qwen3EncoderConfig.from_folder(folder)
    state = read_tensors(folder, _PREFIX)
    if not state:
        raise ValueError(f"{folder / WEIGHTS_FILE} holds no encoder weights (no {_PREFIX}* tensors): this speech "
                         "tokenizer decodes only, so a reference clip cannot be encoded with it")
    with torch.device("meta"):
        network = Qwen3EncoderNetwork(config)
    expected = network.checkpoint_keys()
    missing, unexpected = expected - state.keys(), state.keys() - expected
    if missing or unexpected:
        raise ValueError(f"{folder / WEIGHTS_FILE}: the encoder's weights are not those its config.json describes: "
                         f"missing {_names(missing)}; unexpected {_names(unexpected)}")
    network.load_state_dict(_fold_codebooks(state, network), assign=True)
    return network.to(device=device, dtype=torch.float32).eval().requires_grad_(False)


def _names(keys: set[str]) -> str:
    shown = sorted(_PREFIX + key for key in keys)
    more = f" and {len(shown) - _SHOWN_KEYS} more" if len(shown) > _SHOWN_KEYS else ""
    return (", ".join(shown[:_SHOWN_KEYS]) + more) if shown else "none"


def _fold_codebooks(state: dict[str, Tensor], network: Qwen3EncoderNetwork) -> dict[str, Tensor]:
    """The checked reference state dict in the network's layout: each quantizer's first `used`
    codebooks as one `codebooks` tensor (codebook_vectors of embed_sum and cluster_usage), the rest of
    the codebooks and the decoding projections dropped."""
    folded = {key: tensor for key, tensor in state.items()
              if not _CODEBOOK_KEY.match(key) and not key.endswith(".output_proj.weight")}
    for name in _QUANTIZERS:
        used = getattr(network.quantizer, name).codebooks.shape[0]
        layer = f"quantizer.{name}.layers"
        folded[f"quantizer.{name}.codebooks"] = torch.stack([
            codebook_vectors(state[f"{layer}.{i}.codebook.embed_sum"], state[f"{layer}.{i}.codebook.cluster_usage"])
            for i in range(used)])
    return folded


class Qwen3Encoder12Hz:
    """A reference clip → its codes, as the reference's speech tokenizer encodes it. Invariant: a
    clip of L samples at `sample_rate` gives ceil(L / samples_per_frame) frames of `num_groups`
    codes, each in [0, codebook_size), and frame t depends only on the samples before
    (t + 1) * samples_per_frame (every layer is causal)."""

    def __init__(self, network: Qwen3EncoderNetwork) -> None:
        config = network.config
        self.network = network
        self.config = config
        self.sample_rate = config.sample_rate
        self.samples_per_frame = config.samples_per_frame
        self.num_groups = config.valid_quantizers
        self.device = network.downsample.conv.weight.device

    @classmethod
    def from_folder(cls, folder: str | Path, device: torch.device | str = "cpu") -> Qwen3Encoder12Hz:
        """The encoder of a speech_tokenizer folder (config.json, model.safetensors)."""
        return cls(load_encoder(folder, device))

    @torch.inference_mode()
    def encode(self, audio: Tensor | np.ndarray, sample_rate: int) -> Tensor:
        """Mono float samples in [-1, 1] at `sample_rate` (resampled to the encoder's rate when
        it differs) → codes [frames, num_groups] int64, on the CPU."""
        clip = encoder_input(audio, sample_rate, self.sample_rate)
        codes = self.network(torch.from_numpy(clip).to(self.device)[None, None])
        return codes[0].transpose(0, 1).cpu()
