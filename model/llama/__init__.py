"""The Llama decoder family: config, layers, model over a paged KV cache, and checkpoint loading."""
from model.llama.config import LlamaArchConfig
from model.llama.loader import load_llama, read_llama_config
from model.llama.model import LlamaModel

__all__ = ["LlamaArchConfig", "LlamaModel", "load_llama", "read_llama_config"]
