"""Qwen3-TTS text → token ids: the checkpoint's Qwen2 byte-level BPE tokenizer (built with the
`tokenizers` library, no transformers), and the chat templates the reference wraps each text in."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers
from tokenizers.models import BPE

# Qwen2's pre-tokenizer split: contractions, letter runs (with one leading non-letter), single
# digits, punctuation runs, newline runs, then other whitespace.
QWEN2_SPLIT = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
               r"""|\s*[\r\n]+|\s+(?!\S)|\s+""")

# The reference's templates. The assistant turn opens with 3 role tokens ("<|im_start|>",
# "assistant", "\n") and closes with 5 ("<|im_end|>", "\n", "<|im_start|>", "assistant", "\n");
# a reference transcript's turn closes with 2. The text is cut out of the whole template's ids
# (not tokenized alone) because that is what the reference feeds the model.
ASSISTANT_TEMPLATE = "<|im_start|>assistant\n{}<|im_end|>\n<|im_start|>assistant\n"
REFERENCE_TEMPLATE = "<|im_start|>assistant\n{}<|im_end|>\n"
INSTRUCTION_TEMPLATE = "<|im_start|>user\n{}<|im_end|>\n"
ROLE_TOKENS = 3
ASSISTANT_TAIL_TOKENS = 5
REFERENCE_TAIL_TOKENS = 2


@dataclass(frozen=True, slots=True)
class AssistantIds:
    """One assistant turn's ids: `role` (the first ROLE_TOKENS) and the user's `text` between
    the role and the template's tail."""

    role: list[int]
    text: list[int]


class Qwen3TextTokenizer:
    """Wraps a Qwen2 tokenizer; every method returns the ids the reference's Qwen2TokenizerFast
    gives for the same template (no BOS; special tokens in the text are parsed as the reference
    parses them)."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer

    @classmethod
    def from_folder(cls, folder: Path) -> Qwen3TextTokenizer:
        if (folder / "tokenizer.json").is_file():
            return cls(Tokenizer.from_file(str(folder / "tokenizer.json")))
        return cls(build_qwen2_tokenizer(folder))

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def assistant(self, text: str) -> AssistantIds:
        ids = self.encode(ASSISTANT_TEMPLATE.format(text))
        return AssistantIds(role=ids[:ROLE_TOKENS], text=ids[ROLE_TOKENS:-ASSISTANT_TAIL_TOKENS])

    def reference_text(self, text: str) -> list[int]:
        """A clone reference's transcript, without its turn's role and tail."""
        return self.encode(REFERENCE_TEMPLATE.format(text))[ROLE_TOKENS:-REFERENCE_TAIL_TOKENS]

    def instruction(self, text: str) -> list[int]:
        """The whole user turn carrying an instruction (the reference keeps its role and tail)."""
        return self.encode(INSTRUCTION_TEMPLATE.format(text))


def build_qwen2_tokenizer(folder: Path) -> Tokenizer:
    """The tokenizer transformers' Qwen2TokenizerFast builds from vocab.json, merges.txt and
    tokenizer_config.json's added_tokens_decoder."""
    vocab = json.loads((folder / "vocab.json").read_text(encoding="utf-8"))
    merges = [tuple(line.split(" ")) for line in (folder / "merges.txt").read_text(encoding="utf-8").splitlines()
              if line and not line.startswith("#version")]
    tokenizer = Tokenizer(BPE(vocab=vocab, merges=merges, dropout=None, unk_token=None, continuing_subword_prefix="",
                              end_of_word_suffix="", fuse_unk=False, byte_fallback=False))
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tokenizer.decoder = decoders.ByteLevel()
    config_file = folder / "tokenizer_config.json"
    declared = json.loads(config_file.read_text(encoding="utf-8")).get("added_tokens_decoder", {}) \
        if config_file.is_file() else {}
    # NOTE: like transformers, add them in id order and let the vocabulary assign the ids (the
    # next free ones); a file whose declared ids disagree would make the reference give other ids
    # than the config's special ids, so it is refused rather than silently followed.
    for token_id, spec in sorted(((int(k), v) for k, v in declared.items()), key=lambda item: item[0]):
        token = AddedToken(spec["content"], single_word=spec.get("single_word", False),
                           lstrip=spec.get("lstrip", False), rstrip=spec.get("rstrip", False),
                           normalized=spec.get("normalized", not spec.get("special", False)),
                           special=spec.get("special", False))
        if spec.get("special", False):
            tokenizer.add_special_tokens([token])
        else:
            tokenizer.add_tokens([token])
        if tokenizer.token_to_id(spec["content"]) != token_id:
            raise ValueError(f"{config_file}: added token {spec['content']!r} is declared as id {token_id} "
                             f"but the vocabulary gives it {tokenizer.token_to_id(spec['content'])}")
    return tokenizer
