"""Repetition penalties and the minimum-length mask: what `Sampler` does to a step's logits before
its warpers (Hugging Face's RepetitionPenaltyLogitsProcessor and MinNewTokensLengthLogitsProcessor).

A penalised (row, id) pair is one flat position into the [B, V] scores: one read and one write of
all the batch's pairs (two-dimensional advanced indexing costs several times more on a step's
batch). A decode batch is usually the last one again, and each of its rows adds at most one id a
step, so `PenaltyIndex` keeps the positions it made and appends only the new ones.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from model.sampling.state import SamplingState, same_states


class PenaltyIndex:
    """The penalised pairs of one list of states over one vocabulary. Invariant: after `update`,
    `positions` [N] holds row * vocab_size + id for every penalised id of every row, each once,
    and `penalties` [N] float32 that row's repetition penalty (a state's ids only grow, so what
    was read stays right and the rest is appended)."""

    def __init__(self, states: Sequence[SamplingState], vocab_size: int, device: torch.device | str) -> None:
        self.states, self.vocab_size, self.device = tuple(states), vocab_size, torch.device(device)
        self._read = [0] * len(self.states)  # penalised ids of each row already in `positions`
        self.positions = torch.empty(0, dtype=torch.int64, device=device)
        self.penalties = torch.empty(0, dtype=torch.float32, device=device)

    def fits(self, states: Sequence[SamplingState], vocab_size: int, device: torch.device) -> bool:
        return vocab_size == self.vocab_size and device == self.device and same_states(states, self.states)

    def update(self) -> None:
        """Appends the ids the states took since the last update."""
        positions: list[int] = []
        penalties: list[float] = []
        for row, state in enumerate(self.states):
            if state.num_penalized == self._read[row]:
                continue
            new = state.penalized_ids_from(self._read[row])
            # A flat position past its row would land in the next one: refuse what 2-D indexing refused.
            if min(new) < 0 or max(new) >= self.vocab_size:
                raise IndexError(f"penalised token ids must lie in [0, {self.vocab_size}), "
                                 f"got [{min(new)}, {max(new)}]")
            self._read[row] += len(new)
            base = row * self.vocab_size
            positions += [base + token for token in new]
            penalties += [state.params.repetition_penalty] * len(new)
        if positions:
            self.positions = torch.cat((self.positions, torch.tensor(positions, device=self.device)))
            self.penalties = torch.cat((self.penalties,
                                        torch.tensor(penalties, dtype=torch.float32, device=self.device)))

    def apply(self, scores: Tensor) -> None:
        """Penalises `scores` [B, V] (contiguous float32) in place, as Hugging Face does: a
        negative score times the penalty, any other divided by it."""
        if not len(self.positions):
            return
        flat = scores.view(-1)
        picked = flat.index_select(0, self.positions)
        flat.index_copy_(0, self.positions, torch.where(picked < 0, picked * self.penalties, picked / self.penalties))


def block_stops(scores: Tensor, states: Sequence[SamplingState], stop_token_ids: Sequence[int]) -> None:
    """Sets the stop ids to -inf in place in the rows that have not made their minimum yet."""
    blocked = [row for row, state in enumerate(states) if state.num_generated < state.params.min_tokens]
    if not blocked or len(stop_token_ids) == 0:
        return
    stops = torch.tensor(list(stop_token_ids), device=scores.device)
    if len(blocked) == len(states):
        scores.index_fill_(1, stops, float("-inf"))
    else:
        scores[torch.tensor(blocked, device=scores.device)[:, None], stops[None, :]] = float("-inf")


def float32_copy(logits: Tensor) -> Tensor:
    """A contiguous float32 copy of `logits`, whatever their strides (the penalties index it flat)."""
    return logits.to(dtype=torch.float32, memory_format=torch.contiguous_format, copy=True)


def apply_penalties(
    logits: Tensor, states: Sequence[SamplingState], stop_token_ids: Sequence[int] = ()
) -> Tensor:
    """Returns a float32 copy of ``logits`` with repetition penalties and min_tokens masks applied."""
    scores = float32_copy(logits)
    index = PenaltyIndex(states, scores.shape[-1], scores.device)
    index.update()
    index.apply(scores)
    block_stops(scores, states, stop_token_ids)
    return scores
