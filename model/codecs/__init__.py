"""Codecs: a family's frames → PCM (FrameCodec) and how they are best streamed (WindowHints), SNAC port."""
from model.codecs.base import FrameCodec, WindowHints
from model.codecs.snac import SnacConfig, SnacDecoder, save_random_snac, tiny_snac_config
from model.codecs.snac_frames import SnacFrameCodec

__all__ = [
    "FrameCodec",
    "SnacConfig",
    "SnacDecoder",
    "SnacFrameCodec",
    "WindowHints",
    "save_random_snac",
    "tiny_snac_config",
]
