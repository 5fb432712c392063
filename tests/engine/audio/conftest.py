from __future__ import annotations

import pytest

from model.codecs.snac import SnacDecoder, save_random_snac, tiny_snac_config
from model.codecs.snac_frames import SnacFrameCodec


@pytest.fixture(scope="session")
def codec(tmp_path_factory) -> SnacFrameCodec:
    """The tiny random SNAC (noise off, so every decode of the same frames is the same)."""
    decoder = SnacDecoder.from_pretrained(save_random_snac(tmp_path_factory.mktemp("snac"), tiny_snac_config()))
    decoder.noise = False
    return SnacFrameCodec(decoder)
