"""Prefix-cache keys: a block's hash covers its parent's hash, its tokens and an optional extra key.

The hash is a truncated SHA-256 of a canonical byte encoding, so it is the same in every process
(Python's hash() is salted per process for str and bytes and cannot be shared between workers).
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Hashable, Sequence

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1


def hash_block(
    parent_hash: int | None, token_ids: Sequence[int], extra_key: Hashable | None = None
) -> int:
    digest = hashlib.sha256()
    digest.update(_encode(parent_hash))
    digest.update(_encode(extra_key))
    digest.update(_encode_tokens(token_ids))
    return int.from_bytes(digest.digest()[:8], "little")


def hash_full_blocks(
    token_ids: Sequence[int],
    block_size: int,
    extra_key: Hashable | None = None,
    parent: int | None = None,
) -> list[int]:
    if block_size <= 0:
        raise ValueError(f"block_size must be positive, got {block_size}")
    hashes = []
    for start in range(0, len(token_ids) - block_size + 1, block_size):
        parent = hash_block(parent, token_ids[start : start + block_size], extra_key)
        hashes.append(parent)
    return hashes


def _encode_tokens(token_ids: Sequence[int]) -> bytes:
    tokens = [int(token) for token in token_ids]
    for token in tokens:
        if not _INT64_MIN <= token <= _INT64_MAX:
            raise ValueError(f"token id {token} does not fit in 64 bits")
    return b"T" + struct.pack(f"<Q{len(tokens)}q", len(tokens), *tokens)


def _encode(value: object) -> bytes:
    # NOTE: every encoding starts with a type tag and carries its length, so that no two
    # different keys (say "1" and 1, or ("a", "b") and ("ab",)) share a byte string.
    if value is None:
        return b"N"
    if isinstance(value, bool):
        return b"B1" if value else b"B0"
    if isinstance(value, int):
        raw = str(value).encode()
        return b"I" + struct.pack("<Q", len(raw)) + raw
    if isinstance(value, str):
        raw = value.encode("utf-8")
        return b"S" + struct.pack("<Q", len(raw)) + raw
    if isinstance(value, bytes):
        return b"Y" + struct.pack("<Q", len(value)) + value
    if isinstance(value, tuple):
        return b"U" + struct.pack("<Q", len(value)) + b"".join(_encode(item) for item in value)
    raise TypeError(
        f"extra_key of type {type(value).__name__} has no stable encoding; "
        "use None, bool, int, str, bytes or tuples of them"
    )
