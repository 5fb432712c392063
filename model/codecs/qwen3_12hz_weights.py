"""The 12 Hz codec decoder's module tree and its checkpoint: a speech_tokenizer folder's
model.safetensors, whose `decoder.*` tensors are the reference decoder's state dict (the
`encoder.*` ones, and the quantizers' encoding projections, are not read)."""
from __future__ import annotations

import re
from pathlib import Path

import torch
from safetensors import safe_open
from torch import Tensor, nn

from model.codecs.qwen3_12hz_config import Qwen3CodecConfig
from model.codecs.qwen3_12hz_layers import (CausalConv, CausalUpsample, ConvNeXtBlock, DecoderBlock, SnakeBeta,
                                            SplitQuantizer)
from model.codecs.qwen3_12hz_transformer import SlidingWindowTransformer

WEIGHTS_FILE = "model.safetensors"
_PREFIX = "decoder."
# The reference keeps each codebook as (cluster_usage, embedding_sum) and divides them per call.
_CODEBOOK_KEY = re.compile(r"(quantizer\.rvq_\w+)\.vq\.layers\.(\d+)\._codebook\.(cluster_usage|embedding_sum)$")
_USAGE_EPSILON = 1e-5
# Encoding only: the quantizers' input projections.
_UNUSED_KEY = re.compile(r"quantizer\.rvq_\w+\.input_proj\.weight$")


class Qwen3CodecDecoder(nn.Module):
    """The decoder's parameters, path for path the reference's (codebooks folded): quantizer →
    pre_conv → pre_transformer → upsample stages (transposed conv, ConvNeXt) → decoder (conv,
    upsampling blocks, SnakeBeta, conv to one channel). It has no forward: qwen3_12hz_stream.py
    runs it, a whole decode being a stream's first piece."""

    def __init__(self, config: Qwen3CodecConfig) -> None:
        super().__init__()
        self.config = config
        latent = config.latent_dim
        self.quantizer = SplitQuantizer(config.num_quantizers, config.codebook_size, config.codebook_dim)
        self.pre_conv = CausalConv(config.codebook_dim, latent, 3)
        self.pre_transformer = SlidingWindowTransformer(config)
        self.upsample = nn.ModuleList(nn.ModuleList([CausalUpsample(latent, latent, f, f), ConvNeXtBlock(latent)])
                                      for f in config.upsampling_ratios)
        dims = [config.decoder_dim // 2**i for i in range(len(config.upsample_rates) + 1)]
        self.decoder = nn.ModuleList([
            CausalConv(latent, dims[0], 7),
            *(DecoderBlock(dims[i], dims[i + 1], rate) for i, rate in enumerate(config.upsample_rates)),
            SnakeBeta(dims[-1]),
            CausalConv(dims[-1], 1, 7),
        ])


def load_decoder(folder: str | Path, device: torch.device | str = "cpu",
                 dtype: torch.dtype = torch.float32) -> Qwen3CodecDecoder:
    """The decoder of a speech_tokenizer folder (config.json, model.safetensors)."""
    folder = Path(folder)
    config = Qwen3CodecConfig.from_folder(folder)
    state = read_tensors(folder, _PREFIX)
    with torch.device("meta"):
        decoder = Qwen3CodecDecoder(config)
    decoder.load_state_dict(_fold_codebooks(state), assign=True)
    return decoder.to(device=device, dtype=dtype).eval().requires_grad_(False)


def read_tensors(folder: Path, prefix: str) -> dict[str, Tensor]:
    """The weights file's tensors whose names start with `prefix`, by their names without it."""
    with safe_open(str(folder / WEIGHTS_FILE), framework="pt", device="cpu") as handle:
        return {name[len(prefix):]: handle.get_tensor(name) for name in handle.keys() if name.startswith(prefix)}


def codebook_vectors(embedding_sum: Tensor, cluster_usage: Tensor) -> Tensor:
    """A codebook's vectors from the reference's stored parts (a running sum of the vectors each
    code was assigned, and how often), float32."""
    return embedding_sum.float() / cluster_usage.float().clamp(min=_USAGE_EPSILON)[:, None]


def _fold_codebooks(state: dict[str, Tensor]) -> dict[str, Tensor]:
    """The reference's decoder state dict in our layout: each group's codebooks as one
    `embeddings` tensor of embedding_sum / cluster_usage.clamp(min=1e-5), encoding-only keys dropped."""
    books: dict[str, dict[int, dict[str, Tensor]]] = {}
    folded: dict[str, Tensor] = {}
    for key, tensor in state.items():
        if match := _CODEBOOK_KEY.match(key):
            group, index, part = match.groups()
            books.setdefault(group, {}).setdefault(int(index), {})[part] = tensor.float()
        elif not _UNUSED_KEY.match(key):
            folded[key] = tensor
    for group, parts in books.items():
        if sorted(parts) != list(range(len(parts))) or any(len(p) != 2 for p in parts.values()):
            raise ValueError(f"{group}: incomplete codebooks in the checkpoint")
        folded[f"{group}.embeddings"] = torch.stack([
            codebook_vectors(parts[i]["embedding_sum"], parts[i]["cluster_usage"]) for i in range(len(parts))])
    return folded
