"""The cases of golden/large_vocab.json: golden/make_golden.py records the reference's ids for them
and test_text_split.py checks Chorus's. Both build each case's folder with `write_case`, from
tiny_random's writers, so the fixture holds ids, never a 100,000-entry vocabulary.

A case folder is a tiny checkpoint's config.json (changed as the case says) beside the large
vocabulary's tokenizer files: the facts the reference's choice of split reads, one changed at a time.
"""
from __future__ import annotations

import json
from pathlib import Path

from model.families.qwen3_tts.tiny_random import LARGE_VOCAB, model_config, write_large_vocab_tokenizer
from model.families.qwen3_tts.tokenizer import build_qwen2_tokenizer

# Words with inner capitals, digits, CJK, emoji, and a mix (with marks, contractions, newlines).
TEXTS = (
    "My iPhone runs the OpenAI app on YouTube.",
    "Call 1-800-555-1234 at 10:30; pay $3.50 for 2 iOS17 apps.",
    "你好，今天天气很好。用iPhone拍照，发到YouTube。",
    "Great job 👍🎉 I ❤️ NYC 😀!",
    "McDonald's HTTPServer said नमस्ते to a naïve café: DON'T stop/go.\n\nOK",
)
INSTRUCTION = "Speak like a YouTube host reviewing an iPhone."
# Each case: `config` changes config.json (None deletes the key), `vocab` is the vocabulary's
# size, `layout` the tokenizer files, `config_json` False leaves config.json out.
CASES = {
    "as_written": {},  # tiny_random's config.json: no transformers_version
    "version_4.57.3": dict(config={"transformers_version": "4.57.3"}),
    "version_empty": dict(config={"transformers_version": ""}),
    "version_4.57.2": dict(config={"transformers_version": "4.57.2"}),
    "version_4.57.1": dict(config={"transformers_version": "4.57.1"}),
    "version_4.57.2_no_model_type": dict(config={"transformers_version": "4.57.2", "model_type": None}),
    "version_4.57.2_mistral": dict(config={"transformers_version": "4.57.2", "model_type": "mistral"}),
    "version_4.57.2.post1": dict(config={"transformers_version": "4.57.2.post1"}),
    "version_4.57.3.dev0": dict(config={"transformers_version": "4.57.3.dev0"}),
    "version_4.58.0.dev0": dict(config={"transformers_version": "4.58.0.dev0"}),
    "version_5.0.0rc1": dict(config={"transformers_version": "5.0.0rc1"}),
    "version_5.0.0.dev0": dict(config={"transformers_version": "5.0.0.dev0"}),
    "version_5.0.0": dict(config={"transformers_version": "5.0.0"}),
    "version_5.1.0": dict(config={"transformers_version": "5.1.0"}),
    "vocab_100000": dict(vocab=100_000, config={"transformers_version": "4.57.3"}),
    "no_config_json": dict(config_json=False),
    "tokenizer_json": dict(layout="tokenizer.json", config={"transformers_version": "4.57.3"}),
    "tokenizer_json_5.0.0": dict(layout="tokenizer.json", config={"transformers_version": "5.0.0"}),
    "version_not_a_version": dict(config={"transformers_version": "four"}),
}


def write_case(folder: Path, config: dict | None = None, vocab: int = LARGE_VOCAB, layout: str = "vocab.json",
               config_json: bool = True) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    write_large_vocab_tokenizer(folder, vocab)
    if layout == "tokenizer.json":  # the same tokenizer in one file, which both sides then read
        build_qwen2_tokenizer(folder).save(str(folder / "tokenizer.json"))
    if config_json:
        written = {key: value for key, value in (model_config(base=False) | (config or {})).items() if value is not None}
        (folder / "config.json").write_text(json.dumps(written, indent=2) + "\n")
    return folder
