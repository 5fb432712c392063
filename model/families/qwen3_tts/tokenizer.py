"""Qwen3-TTS text → token ids: the checkpoint's Qwen2 byte-level BPE tokenizer (built with the
`tokenizers` library, no transformers), split into words as the reference splits them, and the
chat templates the reference wraps each text in.

Which split the reference runs (`reference_resplits`): qwen-tts 0.1.1 loads its processor with
`fix_mistral_regex=True`, and transformers 4.57.3 (tokenization_utils_base.py:
`PreTrainedTokenizerBase._from_pretrained`, then `_patch_mistral_regex`) then puts MISTRAL_FIX_SPLIT
in place of the tokenizer's first pre-tokenizer (Qwen2's split) when
- the tokenizer is a fast one (it always is there) with a pre-tokenizer, whose vocabulary without
  its added tokens has more than 100,000 entries (`vocab_size`; vocab.json's entries);
- it is loaded from a folder (`os.path.isdir`; from a hub id, only a model tagged
  `base_model:...mistralai` is re-split), and that folder has a config.json;
- whose `transformers_version` is absent or empty, or above 4.57.2 and below 5.0.0 (PEP 440:
  4.57.3.dev0 and 5.0.0rc1 are too), or at most 4.57.2 with no `model_type` or a Mistral one.
The released checkpoints meet all of these (151,643 entries; README.md has the evidence); the tiny
test ones never do (300 entries).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version
from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers
from tokenizers.models import BPE

from model.config import TEXT_SPLITS

# Qwen2's pre-tokenizer split: contractions, letter runs (with one leading non-letter), single
# digits, punctuation runs, newline runs, then other whitespace.
QWEN2_SPLIT = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
               r"""|\s*[\r\n]+|\s+(?!\S)|\s+""")
# The split transformers 4.57.3 installs instead (`_patch_mistral_regex`), character for character:
# no contraction rule; a letter run is upper-case letters then lower-case ones, so a word is cut
# where a lower-case letter meets an upper-case one ("i|Phone", "Open|AI"), and combining marks
# belong to the word ("नमस्ते" whole, where Qwen2's split cuts it at each mark).
MISTRAL_FIX_SPLIT = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
                     r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
                     r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
RESPLIT_ABOVE_VOCAB = 100_000
# The model types whose config.json is still re-split when transformers 4.57.2 or older wrote it.
MISTRAL_MODEL_TYPES = ("mistral", "mistral3", "voxtral", "ministral", "pixtral")

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
    def from_folder(cls, folder: Path, split: str = "auto") -> Qwen3TextTokenizer:
        """The folder's tokenizer (tokenizer.json, else vocab.json + merges.txt) with the split
        `split` names: "auto" the reference's for this folder, "qwen2" the folder's own (Qwen2's),
        "mistral-fix" MISTRAL_FIX_SPLIT."""
        if split not in TEXT_SPLITS:
            raise ValueError(f"split must be one of {', '.join(TEXT_SPLITS)}, got {split!r}")
        if (folder / "tokenizer.json").is_file():
            tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        else:
            tokenizer = build_qwen2_tokenizer(folder)
        if split == "mistral-fix" or (split == "auto" and reference_resplits(folder, tokenizer)):
            # NOTE: in place of the first pre-tokenizer, as transformers does: the byte-level one stays.
            tokenizer.pre_tokenizer[0] = pre_tokenizers.Split(Regex(MISTRAL_FIX_SPLIT), behavior="isolated")
        return cls(tokenizer)

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


def reference_resplits(folder: Path, tokenizer: Tokenizer) -> bool:
    """Whether the reference splits the text of this folder, whose tokenizer is `tokenizer`, with
    MISTRAL_FIX_SPLIT (the module's docstring has the rule; Chorus always loads from a folder).
    A transformers_version that is not a version makes the reference fail to load the folder: so
    does this, saying to choose a split."""
    if tokenizer.get_vocab_size(with_added_tokens=False) <= RESPLIT_ABOVE_VOCAB or tokenizer.pre_tokenizer is None:
        return False
    config_file = folder / "config.json"
    if not config_file.is_file():
        return False
    config = json.loads(config_file.read_text(encoding="utf-8"))
    written_by = config.get("transformers_version")
    if not written_by:
        return True
    try:
        version = Version(written_by)
    except (InvalidVersion, TypeError) as error:
        raise ValueError(f"{config_file}: transformers_version {written_by!r} is not a version, so the reference "
                         "cannot load this folder and its split is unknown: choose one (text_split: qwen2 or "
                         "mistral-fix)") from error
    if version <= Version("4.57.2"):
        return config.get("model_type") is None or config["model_type"] in MISTRAL_MODEL_TYPES
    return version < Version("5.0.0")
