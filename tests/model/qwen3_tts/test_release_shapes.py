"""Random Qwen3-TTS checkpoints at the released sizes: their configs state those sizes and load
through the same code as a download, and a checkpoint drawn at such a shape (fewer layers, so the
suite writes megabytes, not gigabytes) serves a request through the engine."""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from safetensors import safe_open

from model.codecs.qwen3_12hz_config import Qwen3CodecConfig
from model.config import ModelConfig
from model.families.qwen3_tts.config import Qwen3TtsConfig
from model.families.qwen3_tts.release_shapes import RELEASE_SHAPES
from model.families.qwen3_tts.tiny_random import TINY, codec_config, ensure_random_qwen3, model_config
from model.loader import BUILTIN_MODELS, QWEN3_RANDOM, load_frontend
from tests.engine.conftest import core_on_step_clock, drain, engine_config

# (talker width, talker MLP) of each released CustomVoice checkpoint; 28 layers, 16 heads, 8 KV heads of 128.
TALKERS = {"random-qwen3-0.6b": (1024, 3072), "random-qwen3-1.7b": (2048, 6144)}


def test_every_release_shape_is_a_builtin_model():
    assert set(RELEASE_SHAPES) == set(QWEN3_RANDOM) == set(TALKERS)
    assert set(QWEN3_RANDOM) <= set(BUILTIN_MODELS)


@pytest.mark.parametrize("name", sorted(RELEASE_SHAPES))
def test_release_shape_configs_state_the_released_sizes(name):
    shape = RELEASE_SHAPES[name]
    config = Qwen3TtsConfig.from_dicts(model_config(False, shape), shape.generation)
    width, mlp = TALKERS[name]
    talker = config.talker
    assert (talker.hidden_size, talker.intermediate_size, talker.num_layers) == (width, mlp, 28)
    assert (talker.num_heads, talker.num_kv_heads, talker.head_dim) == (16, 8, 128)
    assert config.talker_vocab_size == 3072 and config.text_hidden_size == 2048
    predictor = config.predictor
    assert (predictor.hidden_size, predictor.intermediate_size, predictor.num_layers) == (1024, 3072, 5)
    assert (predictor.num_heads, predictor.num_kv_heads, predictor.head_dim) == (16, 8, 128)
    assert config.predictor_vocab_size == 2048 and config.num_code_groups == 16
    codec = Qwen3CodecConfig.from_tokenizer_dict(codec_config(shape))
    assert (codec.sample_rate, codec.samples_per_frame, codec.codebook_size) == (24000, 1920, 2048)
    assert (codec.latent_dim, codec.hidden_size, codec.num_hidden_layers, codec.decoder_dim) == (1024, 512, 8, 1536)
    # The released sampling: no top-p for either stage.
    assert config.sampling.top_p == 1.0 and config.sampling.subtalker_top_p == 1.0
    assert config.sampling.top_k == config.sampling.subtalker_top_k == 50


def test_release_shapes_draw_no_base_checkpoint(tmp_path):
    with pytest.raises(ValueError, match="no base"):
        ensure_random_qwen3(RELEASE_SHAPES["random-qwen3-0.6b"], tmp_path, base=True)


@pytest.fixture(scope="module")
def shallow_release(tmp_path_factory):
    """The 0.6B shape with two talker and two predictor layers (widths, codebooks, codec and dtype
    as released)."""
    released = RELEASE_SHAPES["random-qwen3-0.6b"]
    shape = dataclasses.replace(
        released, name="shallow-random-qwen3-0.6b",
        talker=released.talker | {"num_hidden_layers": 2},
        predictor=released.predictor | {"num_hidden_layers": 2})
    return shape, ensure_random_qwen3(shape, tmp_path_factory.mktemp("release"))


def test_a_release_shape_is_stored_as_the_downloads_are(shallow_release):
    shape, folder = shallow_release
    assert json.loads((folder / "config.json").read_text())["torch_dtype"] == "bfloat16"
    with safe_open(str(folder / "model.safetensors"), "pt") as f:
        assert {f.get_slice(name).get_dtype() for name in f.keys()} == {"BF16"}
        # A talker 1,024 wide over a 1,024-wide predictor: no projection between them.
        assert not any("small_to_mtp_projection" in name for name in f.keys())
    codec = folder / "speech_tokenizer"
    assert "encoder_config" not in json.loads((codec / "config.json").read_text())
    with safe_open(str(codec / "model.safetensors"), "pt") as f:
        assert not any(name.startswith("encoder.") for name in f.keys())
    assert shape.talker_vocab == 3072 and shape.codec_ids["codec_eos_token_id"] == 2150
    assert TINY.talker_vocab == 1088  # the tiny layout, shrunk the same way


def test_a_release_shape_serves_a_request(shallow_release):
    _, folder = shallow_release
    frontend = load_frontend(ModelConfig(model=str(folder)))
    core = core_on_step_clock(engine_config(str(folder), max_num_seqs=2))
    frames = 5
    params = frontend.default_sampling().replace(max_tokens=frames, min_tokens=frames, seed=3)
    core.add_request("a", frontend.prepare("Hello there.", frontend.voices[0]), params)
    chunks = drain(core)["a"]
    assert chunks[-1].finish_reason == "length"
    audio = np.concatenate([c.pcm for c in chunks])
    assert chunks[-1].sample_rate == 24000 and audio.size == frames * 1920
    assert np.isfinite(audio).all() and 0 < np.abs(audio).max() <= 1.0
