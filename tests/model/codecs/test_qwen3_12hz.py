"""The 12 Hz codec as the engine sees it: read from a speech_tokenizer folder, frames of codes →
PCM, codes checked, and the configuration of the reference's layout read and validated.
(Incremental decoding: test_qwen3_12hz_stream.py; parity with the reference:
test_qwen3_12hz_golden.py.)"""
from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file, save_file

from model.codecs.qwen3_12hz import Qwen3Codec12Hz
from model.codecs.qwen3_12hz_config import Qwen3CodecConfig
from model.codecs.qwen3_12hz_stream import StreamedQwen3Decoder
from model.codecs.qwen3_12hz_weights import Qwen3CodecDecoder
from model.families.qwen3_tts.tiny_random import ensure_tiny_qwen3

# The released Qwen3-TTS-Tokenizer-12Hz decoder_config (its config.json), abridged.
RELEASED = {"decoder_config": dict(
    codebook_size=2048, codebook_dim=512, num_quantizers=16, latent_dim=1024, hidden_size=512, intermediate_size=1024,
    num_hidden_layers=8, num_attention_heads=16, num_key_value_heads=16, head_dim=64, sliding_window=72,
    rope_theta=10000, rms_norm_eps=1e-5, upsample_rates=[8, 5, 4, 3], upsampling_ratios=[2, 2], decoder_dim=1536,
    hidden_act="silu", attention_bias=False, max_position_embeddings=8000, layer_scale_initial_scale=0.01,
    semantic_codebook_size=4096), "output_sample_rate": 24000, "decode_upsample_rate": 1920}


@pytest.fixture(scope="module")
def folder(chorus_cache):
    return ensure_tiny_qwen3() / "speech_tokenizer"


@pytest.fixture(scope="module")
def codec(folder) -> Qwen3Codec12Hz:
    return Qwen3Codec12Hz.from_folder(folder)


def test_frames_of_codes_decode_to_their_samples(codec):
    assert codec.frame_shape == (16,) and codec.frame_dtype == torch.int64
    assert (codec.sample_rate, codec.samples_per_frame) == (8000, 640)
    codes = torch.randint(0, codec.config.codebook_size, (2, 5, 16), generator=torch.Generator().manual_seed(0))
    audio = codec.decode(codes)
    assert audio.shape == (2, 5 * 640) and audio.dtype == torch.float32
    assert audio.abs().max() <= 1.0 and audio.std() > 0.01
    # Causal: a frame's audio never changes with the frames after it.
    assert (codec.decode(codes[:, :3]) - audio[:, : 3 * 640]).abs().max() <= 1e-5


@pytest.mark.parametrize("bad, message", [
    (torch.full((1, 2, 16), -1), "lie in"),
    (torch.full((1, 2, 16), 64), "lie in"),
    (torch.zeros(1, 2, 16), "integers"),
    (torch.zeros(1, 2, 8, dtype=torch.int64), "frames must be"),
])
def test_codes_outside_the_codebooks_are_refused(codec, bad, message):
    with pytest.raises(ValueError, match=message):
        codec.decode(bad)


def test_the_encoder_and_encoding_projections_are_not_read(codec, folder, tmp_path):
    state = load_file(str(folder / "model.safetensors"))
    assert any(".input_proj." in key for key in state if key.startswith("decoder.quantizer"))
    state["encoder.quantizer.semantic_residual_vector_quantizer.input_proj.weight"] = torch.ones(2, 2, 1)
    save_file(state, str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text((folder / "config.json").read_text())
    codes = torch.randint(0, codec.config.codebook_size, (1, 4, 16), generator=torch.Generator().manual_seed(1))
    assert torch.equal(Qwen3Codec12Hz.from_folder(tmp_path).decode(codes), codec.decode(codes))


def test_the_released_configuration_and_its_stream_state():
    config = Qwen3CodecConfig.from_tokenizer_dict(RELEASED)
    assert (config.samples_per_frame, config.sample_rate, config.head_dim) == (1920, 24000, 64)
    with torch.device("meta"):
        shapes = StreamedQwen3Decoder(Qwen3CodecDecoder(config)).state_shapes()
    # keys and values of 71 past positions in 8 layers, and every causal conv's left context
    assert shapes[0][0] == shapes[1][0] == (8, 16, 71, 64)
    kv, convs = (sum(torch.Size(shape).numel() for shape, _ in part) for part in (shapes[:2], shapes[2:]))
    assert (kv, convs) == (1_163_264, 135_232)  # floats: 4.65 MB + 0.54 MB a stream in float32


def test_a_configuration_the_port_cannot_compute_is_refused():
    def with_decoder(**changes):
        return {**RELEASED, "decoder_config": {**RELEASED["decoder_config"], **changes}}

    with pytest.raises(ValueError, match="decode_upsample_rate"):
        Qwen3CodecConfig.from_tokenizer_dict({**RELEASED, "decode_upsample_rate": 960})
    with pytest.raises(ValueError, match="sliding_window"):
        Qwen3CodecConfig.from_tokenizer_dict(with_decoder(sliding_window=None))
    with pytest.raises(ValueError, match="rope_scaling"):
        Qwen3CodecConfig.from_tokenizer_dict(with_decoder(rope_scaling={"rope_type": "dynamic", "factor": 2.0}))
    # Without head_dim the reference takes hidden_size / heads.
    without = {key: value for key, value in RELEASED["decoder_config"].items() if key != "head_dim"}
    assert Qwen3CodecConfig.from_tokenizer_dict({**RELEASED, "decoder_config": without}).head_dim == 512 // 16
