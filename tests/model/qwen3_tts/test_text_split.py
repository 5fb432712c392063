"""Chorus cuts a Qwen3-TTS checkpoint's text into words as the reference does: past 100,000
vocabulary entries the reference's processor (fix_mistral_regex=True, transformers 4.57.3) cuts them
at inner capitals, for the folders whose facts say so. Every expectation is what the reference itself
gave (golden/large_vocab.json, written by make_golden.py), never a re-implementation of its rule."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from api.config.engine_args import add_engine_args, engine_config_from_args
from model.config import ModelConfig
from model.families.qwen3_tts.tiny_random import LARGE_VOCAB
from model.families.qwen3_tts.tokenizer import (ASSISTANT_TEMPLATE, MISTRAL_FIX_SPLIT, QWEN2_SPLIT,
                                                Qwen3TextTokenizer, build_qwen2_tokenizer, reference_resplits)
from model.loader import load_frontend
from tests.model.qwen3_tts.text_split_cases import CASES, INSTRUCTION, TEXTS, write_case

GOLDEN = json.loads((Path(__file__).parent / "golden" / "large_vocab.json").read_text())


def split_of(tokenizer: Qwen3TextTokenizer) -> str:
    """The regex of the tokenizer's first pre-tokenizer."""
    return json.loads(tokenizer.tokenizer.to_str())["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return write_case(tmp_path_factory.mktemp("large-vocab"))


def test_the_fixture_is_of_these_cases_and_this_vocabulary():
    assert [text["text"] for text in GOLDEN["texts"]] == list(TEXTS) and GOLDEN["instruction"]["text"] == INSTRUCTION
    assert [case["name"] for case in GOLDEN["cases"]] == list(CASES)
    assert GOLDEN["vocab"] == LARGE_VOCAB
    assert GOLDEN["splits"] == {"qwen2": QWEN2_SPLIT, "mistral-fix": MISTRAL_FIX_SPLIT}


@pytest.mark.parametrize("split, key", [("auto", "ids"), ("mistral-fix", "ids"), ("qwen2", "qwen2_ids")])
def test_each_text_gets_the_references_ids(folder, split, key):
    tokenizer = Qwen3TextTokenizer.from_folder(folder, split)
    assert split_of(tokenizer) == GOLDEN["splits"]["qwen2" if key == "qwen2_ids" else "mistral-fix"]
    for text in GOLDEN["texts"]:
        assert tokenizer.encode(ASSISTANT_TEMPLATE.format(text["text"])) == text[key], text["text"]
    assert tokenizer.instruction(INSTRUCTION) == GOLDEN["instruction"][key]


def test_inner_capitals_and_marks_change_the_ids_and_digits_and_emoji_do_not():
    changed = [text["ids"] != text["qwen2_ids"] for text in GOLDEN["texts"]]
    # inner capitals; digits (iOS17's pieces join alike); CJK with iPhone inside; emoji; the mix
    assert changed == [True, False, True, False, True]


@pytest.mark.parametrize("case", GOLDEN["cases"], ids=lambda case: case["name"])
def test_the_split_follows_the_facts_the_reference_reads(tmp_path, case):
    folder = write_case(tmp_path, **CASES[case["name"]])
    if "error" in case:  # the reference cannot load the folder: Chorus says so, and a chosen split loads
        with pytest.raises(ValueError, match="not a version"):
            Qwen3TextTokenizer.from_folder(folder)
        assert split_of(Qwen3TextTokenizer.from_folder(folder, "qwen2")) == QWEN2_SPLIT
        return
    tokenizer = Qwen3TextTokenizer.from_folder(folder)
    assert split_of(tokenizer) == GOLDEN["splits"][case["split"]]
    assert tokenizer.encode(ASSISTANT_TEMPLATE.format(TEXTS[0])) == case["ids"]


def test_a_tokenizer_without_a_pre_tokenizer_is_not_re_split(folder):
    # transformers 4.57.3 re-splits only a tokenizer that has a pre-tokenizer to replace.
    tokenizer = build_qwen2_tokenizer(folder)
    assert reference_resplits(folder, tokenizer)
    tokenizer.pre_tokenizer = None
    assert not reference_resplits(folder, tokenizer)


def test_the_flag_chooses_the_split_the_served_frontend_uses(folder):
    parser = argparse.ArgumentParser()
    add_engine_args(parser)
    text = GOLDEN["texts"][0]
    for argv, key in (([], "ids"), (["--text-split", "qwen2"], "qwen2_ids"), (["--text-split", "mistral-fix"], "ids")):
        config = engine_config_from_args(parser.parse_args(["--model", str(folder), *argv])).model
        frontend = load_frontend(config)
        assert frontend.tokenizer.encode(ASSISTANT_TEMPLATE.format(text["text"])) == text[key], argv
    with pytest.raises(SystemExit):
        parser.parse_args(["--text-split", "words"])
    with pytest.raises(ValueError, match="text_split"):
        ModelConfig(text_split="words")
    with pytest.raises(ValueError, match="split"):
        Qwen3TextTokenizer.from_folder(folder, "words")
