"""Per-step description of a flat batch for paged attention."""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(slots=True)
class AttentionMetadata:
    """One flat batch of B sequences and T new tokens (sequence i owns rows query_start_loc[i]:query_start_loc[i+1]);
    the new tokens of sequence i sit at positions seq_lens[i]-query_len_i .. seq_lens[i]-1.

    Cache slots are flat indices ``block_id * block_size + offset``; a sequence's position p lives in slot
    ``block_tables[i, p // block_size] * block_size + p % block_size``. Entries of ``block_tables`` past a
    sequence's blocks are padding (0) and are never read.
    """

    query_start_loc: Tensor
    seq_lens: Tensor
    block_tables: Tensor
    slot_mapping: Tensor
    query_lens: list[int]
    context_lens: list[int]
    max_query_len: int
    max_seq_len: int
    block_size: int

    def __post_init__(self) -> None:
        num_seqs = len(self.query_lens)
        if len(self.context_lens) != num_seqs:
            raise ValueError("query_lens and context_lens must have one entry per sequence")
        if self.query_start_loc.shape != (num_seqs + 1,) or self.seq_lens.shape != (num_seqs,):
            raise ValueError("query_start_loc must be [B+1] and seq_lens [B]")
        if self.block_tables.dim() != 2 or self.block_tables.shape[0] != num_seqs:
            raise ValueError("block_tables must be [B, max_blocks]")
        if self.slot_mapping.shape != (sum(self.query_lens),):
            raise ValueError("slot_mapping must have one slot per new token")
        if self.block_size <= 0:
            raise ValueError("block_size must be positive")

    @property
    def num_seqs(self) -> int:
        return len(self.query_lens)

    @property
    def num_tokens(self) -> int:
        return int(self.slot_mapping.shape[0])

    def token_rows(self, seq_indices: list[int]) -> list[int]:
        """The flat batch rows of the new tokens of the sequences `seq_indices`, in that order."""
        starts = [0, *itertools.accumulate(self.query_lens)]
        return [row for i in seq_indices for row in range(starts[i], starts[i + 1])]

    def subset(self, seq_indices: list[int], rows: Tensor | None = None) -> AttentionMetadata:
        """The batch of only the sequences `seq_indices` (in that order), whose tokens are rows
        `rows` of this one (int64; when not given, computed: `token_rows(seq_indices)`); the cache
        layout is unchanged."""
        device = self.seq_lens.device
        index = torch.tensor(seq_indices, dtype=torch.int64, device=device)
        query_lens = [self.query_lens[i] for i in seq_indices]
        context_lens = [self.context_lens[i] for i in seq_indices]
        if rows is None:
            rows = torch.tensor(self.token_rows(seq_indices), dtype=torch.int64, device=device)
        return AttentionMetadata(
            query_start_loc=torch.tensor([0, *itertools.accumulate(query_lens)], dtype=torch.int32, device=device),
            seq_lens=self.seq_lens.index_select(0, index),
            block_tables=self.block_tables.index_select(0, index),
            slot_mapping=self.slot_mapping.index_select(0, rows),
            query_lens=query_lens,
            context_lens=context_lens,
            max_query_len=max(query_lens),
            max_seq_len=max(ctx + q for ctx, q in zip(context_lens, query_lens)),
            block_size=self.block_size,
        )

    @classmethod
    def build(
        cls,
        query_lens: list[int],
        context_lens: list[int],
        block_tables: list[list[int]],
        block_size: int,
        device: torch.device | str = "cpu",
    ) -> AttentionMetadata:
        if not (len(query_lens) == len(context_lens) == len(block_tables)) or not query_lens:
            raise ValueError("query_lens, context_lens and block_tables need one entry per sequence (at least one)")
        if block_size <= 0:
            raise ValueError("block_size must be positive")
        seq_lens = [ctx + q for ctx, q in zip(context_lens, query_lens)]
        for i, (q, ctx, table) in enumerate(zip(query_lens, context_lens, block_tables)):
            if q < 1 or ctx < 0:
                raise ValueError(f"sequence {i}: query_len must be >= 1 and context_len >= 0")
            if len(table) * block_size < seq_lens[i]:
                raise ValueError(f"sequence {i}: {len(table)} blocks cannot hold {seq_lens[i]} tokens")
        max_blocks = max(len(table) for table in block_tables)
        padded_tables = [table + [0] * (max_blocks - len(table)) for table in block_tables]

        # NOTE: the few small index arrays are built in python and moved in one transfer each: a
        # step's metadata is host work on its critical path, and on the CPU a chain of tiny torch
        # ops (repeat_interleave, cumsum, gathers) cost several times more than these loops.
        slot_mapping = [
            table[position // block_size] * block_size + position % block_size
            for q, ctx, table in zip(query_lens, context_lens, padded_tables)
            for position in range(ctx, ctx + q)
        ]
        starts = [0, *itertools.accumulate(query_lens)]

        return cls(
            query_start_loc=torch.tensor(starts, dtype=torch.int32, device=device),
            seq_lens=torch.tensor(seq_lens, dtype=torch.int32, device=device),
            block_tables=torch.tensor(padded_tables, dtype=torch.int32, device=device),
            slot_mapping=torch.tensor(slot_mapping, dtype=torch.int64, device=device),
            query_lens=list(query_lens),
            context_lens=list(context_lens),
            max_query_len=max(query_lens),
            max_seq_len=max(seq_lens),
            block_size=block_size,
        )
