"""Paged attention: per-step metadata, the backend interface and its implementations."""
from model.attention.backend import AttentionBackend, get_attention_backend
from model.attention.metadata import AttentionMetadata

__all__ = ["AttentionBackend", "AttentionMetadata", "get_attention_backend"]
