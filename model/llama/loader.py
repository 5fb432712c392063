"""Build a LlamaModel from a Hugging Face checkpoint folder (config.json + safetensors)."""
from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import torch
from safetensors import safe_open
from torch import Tensor

from model.attention import AttentionBackend
from model.llama.config import LlamaArchConfig
from model.llama.model import LlamaModel

_SHARD_INDEX = "model.safetensors.index.json"


def read_llama_config(path: str | Path) -> LlamaArchConfig:
    return LlamaArchConfig.from_hf_dict(json.loads((Path(path) / "config.json").read_text()))


def load_llama(path: str | Path, attention: AttentionBackend, dtype: torch.dtype = torch.float32,
               device: torch.device | str = "cpu") -> LlamaModel:
    # NOTE: built on the meta device so no memory is spent on a random init that the checkpoint overwrites;
    # load_weights refuses a checkpoint that leaves any parameter unset.
    with torch.device("meta"):
        model = LlamaModel(read_llama_config(path), attention)
    model = model.to(dtype).to_empty(device=device)
    model.load_weights(checkpoint_weights(path))
    return model.eval()


def checkpoint_weights(path: str | Path) -> Iterator[tuple[str, Tensor]]:
    """Every (name, tensor) of a folder's safetensors checkpoint, sharded or not, read lazily."""
    return _read_safetensors(_checkpoint_files(Path(path)))


def _checkpoint_files(folder: Path) -> list[Path]:
    index = folder / _SHARD_INDEX
    if index.exists():
        shard_names = set(json.loads(index.read_text())["weight_map"].values())
        return [folder / name for name in sorted(shard_names)]
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"no *.safetensors files in {folder}")
    return files


def _read_safetensors(files: list[Path]) -> Iterator[tuple[str, Tensor]]:
    for file in files:
        with safe_open(str(file), framework="pt", device="cpu") as handle:
            for name in handle.keys():
                yield name, handle.get_tensor(name)
