"""The tiny Qwen3-TTS checkpoints: deterministic, byte-identical to the ones the golden fixtures were
made from, laid out as the real downloads, and with ids that agree with each other."""
from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import pytest
from safetensors import safe_open
from tokenizers import Tokenizer, decoders, models, pre_tokenizers

from model.families.qwen3_tts.tiny_random import CODEBOOK, VERSION, ensure_tiny_qwen3

GOLDEN = Path(__file__).resolve().parent / "golden" / "cases.json"
FILES = ("config.json", "generation_config.json", "model.safetensors", "vocab.json", "merges.txt",
         "tokenizer_config.json", "speech_tokenizer/config.json", "speech_tokenizer/preprocessor_config.json",
         "speech_tokenizer/model.safetensors")
KINDS = {"custom_voice": False, "base": True}


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tiny-qwen3")
    return {kind: ensure_tiny_qwen3(root, base=base) for kind, base in KINDS.items()}


def read(folder: Path, name: str) -> dict:
    return json.loads((folder / name).read_text())


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("kind", KINDS)
def test_builder_is_deterministic(built, kind, tmp_path):
    again = ensure_tiny_qwen3(tmp_path, base=KINDS[kind])
    assert again.name == built[kind].name and VERSION in again.name
    for name in FILES:
        assert (again / name).read_bytes() == (built[kind] / name).read_bytes(), name


@pytest.mark.parametrize("kind", KINDS)
def test_weights_are_those_the_golden_fixtures_were_made_from(built, kind):
    recorded = json.loads(GOLDEN.read_text())["checkpoints"][kind]
    assert recorded["name"] == built[kind].name
    assert sha256(built[kind] / "model.safetensors") == recorded["model_sha256"], "rerun `make qwen3-golden`"
    assert sha256(built[kind] / "speech_tokenizer" / "model.safetensors") == recorded["codec_sha256"]


@pytest.mark.parametrize("kind", KINDS)
def test_layout_has_every_file(built, kind):
    for name in FILES:
        assert (built[kind] / name).is_file(), name
    config = read(built[kind], "config.json")
    assert config["model_type"] == "qwen3_tts" and config["tts_model_type"] == kind
    with safe_open(str(built[kind] / "model.safetensors"), "pt") as f:
        keys = set(f.keys())
    assert any(k.startswith("speaker_encoder.") for k in keys) == (kind == "base")
    assert any(k.startswith("talker.code_predictor.small_to_mtp_projection") for k in keys) == (kind == "base")
    with safe_open(str(built[kind] / "speech_tokenizer" / "model.safetensors"), "pt") as f:
        assert {k.split(".")[0] for k in f.keys()} == {"decoder", "encoder"}  # the Mimi encoder's too


@pytest.mark.parametrize("kind", KINDS)
def test_codec_ids_sit_where_the_reference_suppresses(built, kind):
    talker = read(built[kind], "config.json")["talker_config"]
    vocab, eos = talker["vocab_size"], talker["codec_eos_token_id"]
    suppressed = set(range(vocab - 1024, vocab)) - {eos}
    specials = [v for k, v in talker.items() if k.startswith("codec_") and isinstance(v, int)]
    specials += [*talker["codec_language_id"].values(), *talker["spk_id"].values()]
    assert set(specials) <= suppressed | {eos} and len(set(specials)) == len(specials)
    assert set(range(CODEBOOK)).isdisjoint(suppressed)  # every code stays reachable
    assert talker["code_predictor_config"]["vocab_size"] == CODEBOOK == vocab - 1024
    assert talker["num_code_groups"] == talker["code_predictor_config"]["num_code_groups"] == 16
    rope = talker["rope_scaling"]
    assert rope["interleaved"] and sum(rope["mrope_section"]) == talker["head_dim"] // 2


def test_dialect_speakers_name_dialect_languages(built):
    talker = read(built["custom_voice"], "config.json")["talker_config"]
    assert set(talker["spk_is_dialect"]) == set(talker["spk_id"])
    dialects = {v for v in talker["spk_is_dialect"].values() if v}
    assert dialects and all("dialect" in d and d in talker["codec_language_id"] for d in dialects)
    assert {"chinese", "english"} <= set(talker["codec_language_id"])


@pytest.mark.parametrize("kind", KINDS)
def test_text_ids_agree_with_the_tokenizer(built, kind):
    folder = built[kind]
    config, tok = read(folder, "config.json"), read(folder, "tokenizer_config.json")
    added = {v["content"]: int(k) for k, v in tok["added_tokens_decoder"].items()}
    assert config["im_start_token_id"] == added["<|im_start|>"] and config["im_end_token_id"] == added["<|im_end|>"]
    for key in ("im_start", "im_end", "tts_pad", "tts_bos", "tts_eos"):
        assert config[f"{key}_token_id"] < config["talker_config"]["text_vocab_size"]
    vocab = read(folder, "vocab.json")
    assert min(added.values()) == len(vocab)  # the specials follow the BPE vocabulary
    bpe = Tokenizer(models.BPE.from_file(str(folder / "vocab.json"), str(folder / "merges.txt")))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    # The reference slices `<|im_start|>assistant\n` as 3 ids and `<|im_end|>\n<|im_start|>assistant\n` as 5.
    assert bpe.encode("assistant").ids == [config["assistant_token_id"]]
    assert len(bpe.encode("user").ids) == 1 and len(bpe.encode("\n").ids) == 1
    text = "Hello, 你好。"
    assert bpe.decode(bpe.encode(text).ids) == text


@pytest.mark.parametrize("kind", KINDS)
def test_codec_config_is_self_consistent(built, kind):
    codec = read(built[kind], "speech_tokenizer/config.json")
    decoder = codec["decoder_config"]
    spf = math.prod(decoder["upsample_rates"]) * math.prod(decoder["upsampling_ratios"])
    assert codec["decode_upsample_rate"] == spf and codec["output_sample_rate"] == spf * 12.5
    assert decoder["codebook_size"] == CODEBOOK and decoder["num_quantizers"] == 16
    assert decoder["decoder_dim"] % 2 ** len(decoder["upsample_rates"]) == 0
    generation = read(built[kind], "generation_config.json")
    assert {"do_sample", "top_k", "top_p", "temperature", "repetition_penalty", "subtalker_dosample",
            "subtalker_top_k", "subtalker_top_p", "subtalker_temperature", "max_new_tokens"} == set(generation)
