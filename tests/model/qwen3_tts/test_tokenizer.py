"""The Qwen3-TTS text tokenizer gives the reference's ids (Qwen2TokenizerFast) without transformers."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from model.families.qwen3_tts import tiny_random, tiny_tokenizer
from model.families.qwen3_tts.tokenizer import (ASSISTANT_TEMPLATE, QWEN2_SPLIT, Qwen3TextTokenizer,
                                                build_qwen2_tokenizer)

GOLDEN = Path(__file__).parent / "golden"
# The golden cases whose prompt the reference recorded (ids, embeddings); none until it is generated.
GOLDEN_META = json.loads((GOLDEN / "cases.json").read_text()) if (GOLDEN / "cases.json").is_file() else {}
GOLDEN_CASES = [case for case in GOLDEN_META.get("cases", ()) if "prompt_positions" in case]
# Ids the reference's tokenizer (transformers 4.57.3 Qwen2TokenizerFast) gave for these whole
# templates with tiny_random's tokenizer: NFC, digits one by one, CJK bytes, "\r\n\n" as one run.
REFERENCE_IDS = {
    "<|im_start|>assistant\nCafe\u0301 1234, it's 你好。\r\n\n  ok  <|im_end|>\n<|im_start|>assistant\n": [
        301, 263, 10, 67, 97, 102, 195, 169, 32, 49, 50, 51, 52, 44, 32, 105, 116, 39, 115, 32, 228, 189, 160, 284,
        281, 13, 10, 10, 32, 32, 111, 107, 32, 32, 302, 10, 301, 263, 10],
    "<|im_start|>user\nspeak slowly<|im_end|>\n": [
        301, 266, 10, 115, 112, 271, 107, 269, 108, 111, 119, 108, 121, 302, 10],
}


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    path = tmp_path_factory.mktemp("qwen3-tokenizer")
    tiny_tokenizer.write_tokenizer(path)
    return path


@pytest.fixture(scope="module")
def tokenizer(folder):
    return Qwen3TextTokenizer.from_folder(folder)


@pytest.mark.parametrize("text", list(REFERENCE_IDS))
def test_whole_templates_get_the_reference_ids(tokenizer, text):
    assert tokenizer.encode(text) == REFERENCE_IDS[text]


def test_the_templates_are_cut_where_the_reference_cuts_them(tokenizer):
    ids = tiny_random.TEXT_IDS
    im_start, im_end = ids["im_start_token_id"], ids["im_end_token_id"]
    assistant = tokenizer.assistant("she said")
    assert assistant.role == [im_start, tokenizer.tokenizer.token_to_id("assistant"), 10]
    assert assistant.text == tokenizer.encode("she said")
    assert tokenizer.reference_text("she said") == assistant.text
    assert tokenizer.instruction("speak slowly") == REFERENCE_IDS["<|im_start|>user\nspeak slowly<|im_end|>\n"]
    assert tokenizer.encode("<|tts_pad|><|tts_text_bos|><|tts_text_eod|>") == [
        ids["tts_pad_token_id"], ids["tts_bos_token_id"], ids["tts_eos_token_id"]]
    assert tokenizer.encode("<|im_end|>") == [im_end]


def test_the_tiny_vocabulary_keeps_qwen2s_split(tokenizer):
    # 300 entries: the reference re-splits words only past 100,000 (test_text_split.py).
    assert json.loads(tokenizer.tokenizer.to_str())["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] == QWEN2_SPLIT


def test_a_tokenizer_json_gives_the_same_ids(tokenizer, tmp_path):
    tokenizer.tokenizer.save(str(tmp_path / "tokenizer.json"))
    saved = Qwen3TextTokenizer.from_folder(tmp_path)
    for text in REFERENCE_IDS:
        assert saved.encode(text) == tokenizer.encode(text)


def test_declared_special_ids_that_the_vocabulary_would_not_give_are_refused(folder, tmp_path):
    for name in ("vocab.json", "merges.txt"):
        (tmp_path / name).write_bytes((folder / name).read_bytes())
    config = json.loads((folder / "tokenizer_config.json").read_text())
    config["added_tokens_decoder"] = {str(int(k) + 1): v for k, v in config["added_tokens_decoder"].items()}
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="declared as id"):
        build_qwen2_tokenizer(tmp_path)


@pytest.fixture(scope="module")
def golden_arrays():
    with np.load(GOLDEN / "golden.npz") as arrays:
        return dict(arrays)


@pytest.mark.parametrize("case", GOLDEN_CASES, ids=lambda case: case["name"])
def test_golden_template_ids(tokenizer, golden_arrays, case):
    name = case["name"]
    assistant = tokenizer.assistant(case["text"])
    assert assistant.role + assistant.text == golden_arrays[f"input_ids_{name}"].tolist()[:-5]
    assert tokenizer.encode(ASSISTANT_TEMPLATE.format(case["text"])) == golden_arrays[f"input_ids_{name}"].tolist()
    if case.get("instruct"):
        assert tokenizer.instruction(case["instruct"]) == golden_arrays[f"instruct_ids_{name}"].tolist()
    if case.get("ref_text"):
        assert tokenizer.reference_text(case["ref_text"]) == golden_arrays[f"ref_ids_{name}"].tolist()[3:-2]
