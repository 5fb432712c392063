"""The tiny checkpoints' text tokenizer: a Qwen2-style byte-level BPE (GPT-2 byte alphabet) whose
merges are learned from a fixed corpus, written as vocab.json + merges.txt + tokenizer_config.json
with the special tokens (im_start/im_end, tts_pad/bos/eos) right after the vocabulary."""
from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|tts_pad|>", "<|tts_text_bos|>",
                  "<|tts_text_eod|>")
NUM_MERGES = 44
# The words forced to be single tokens (the reference slices `<|im_start|>assistant\n` as 3 ids),
# then a fixed corpus the remaining merges are learned from.
FORCED_WORDS = ("assistant", "user")
CORPUS = ("the speech of the speaker is the sound of the text; she said that the weather is "
          "nice and the voice is clear. 你好，今天天气很好。我们说话。")


def byte_alphabet() -> list[str]:
    """GPT-2's byte → printable character map, in byte order (the first 256 token ids)."""
    printable = [*range(33, 127), *range(161, 173), *range(174, 256)]
    extra = iter(range(256, 512))
    return [chr(b) if b in printable else chr(next(extra)) for b in range(256)]


def learn_merges() -> list[tuple[str, str]]:
    alphabet = byte_alphabet()
    merges = []
    for word in FORCED_WORDS:  # left-to-right chains: the lowest ranks, so they always apply first
        merges += [(word[:i], word[i]) for i in range(1, len(word))]
    pieces = re.findall(r" ?[^\W\d_]+| ?\d| ?[^\s\w]+|\s+", CORPUS)
    words = Counter(tuple(alphabet[b] for b in piece.encode()) for piece in pieces)
    for a, b in merges:
        words = Counter({merge_pair(w, a, b): n for w, n in words.items()})
    while len(merges) < NUM_MERGES:
        pairs = Counter()
        for w, n in words.items():
            for pair in zip(w, w[1:]):
                pairs[pair] += n
        best = min(pairs, key=lambda p: (-pairs[p], p))  # most frequent, ties by the pair itself
        merges.append(best)
        words = Counter({merge_pair(w, *best): n for w, n in words.items()})
    return merges


def merge_pair(word: tuple[str, ...], a: str, b: str) -> tuple[str, ...]:
    out, i = [], 0
    while i < len(word):
        if i + 1 < len(word) and word[i] == a and word[i + 1] == b:
            out.append(a + b)
            i += 2
        else:
            out.append(word[i])
            i += 1
    return tuple(out)


def tokens() -> dict[str, int]:
    vocab = {ch: i for i, ch in enumerate(byte_alphabet())}
    for a, b in learn_merges():
        vocab.setdefault(a + b, len(vocab))
    assert len(vocab) == 256 + NUM_MERGES, "each merge adds a new token"
    return vocab


def write_tokenizer(folder: Path, vocab: dict[str, int] | None = None,
                    merges: list[tuple[str, str]] | None = None) -> dict[str, int]:
    """Writes the tokenizer files (the tiny vocabulary and merges unless given others); returns
    each special token's id."""
    vocab = vocab or tokens()
    write_json(folder / "vocab.json", vocab)
    (folder / "merges.txt").write_text("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges or learn_merges()))
    added = {str(len(vocab) + i): dict(content=tok, lstrip=False, normalized=False, rstrip=False,
                                       single_word=False, special=True) for i, tok in enumerate(SPECIAL_TOKENS)}
    write_json(folder / "tokenizer_config.json", dict(
        add_bos_token=False, add_prefix_space=False, added_tokens_decoder=added,
        additional_special_tokens=list(SPECIAL_TOKENS[1:]), bos_token=None, clean_up_tokenization_spaces=False,
        eos_token="<|im_end|>", errors="replace", model_max_length=4096, pad_token="<|endoftext|>",
        split_special_tokens=False, tokenizer_class="Qwen2Tokenizer", unk_token=None))
    return {entry["content"]: int(index) for index, entry in added.items()}


def write_json(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
