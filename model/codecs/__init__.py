"""Codecs: a family's frames → PCM (FrameCodec), SNAC port, batched streaming decode."""
from model.codecs.base import FrameCodec
from model.codecs.snac import SnacConfig, SnacDecoder, save_random_snac, tiny_snac_config
from model.codecs.snac_frames import SnacFrameCodec
from model.codecs.streaming import StreamChunk, StreamingConfig, StreamingDecoder

__all__ = [
    "FrameCodec",
    "SnacConfig",
    "SnacDecoder",
    "SnacFrameCodec",
    "StreamChunk",
    "StreamingConfig",
    "StreamingDecoder",
    "save_random_snac",
    "tiny_snac_config",
]
