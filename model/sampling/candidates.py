"""Top-k candidates: the warpers and the Gumbel-max pick over each row's K highest logits.

A row's draw only ever lands in its top-k ids, so where every sampling row bounds its top-k the
warpers can run over the K highest logits (K = the largest top-k of the batch) instead of a sort of
the vocabulary. Exactly the top-k filter's result, except a tie with the K-th logit: Hugging Face's
TopK keeps every tied id, this keeps K ids (float ties are measure zero). The candidates come out
of `topk` already sorted, so the scores are worked on reversed (ascending, the order top-p
accumulates in) with no sort and no scatter back: a row's own smaller top-k is a constant mask of
its first columns, and the picked column maps back to its id by position.

The pick is Gumbel-max: argmax(scores - log E), E ~ Exp(1), the exponential race argmax(p / E) of
`Sampler` without a softmax and a division (the same law: log p differs from the scores by a
per-row constant). E is drawn as -log U, U uniform: torch's CPU `exponential_` costs six times
`rand` (140 against 22 us for 16 rows x 15 sub-steps x 30 candidates).

`GraphSubStepSampler` (model/sampling/graph_substeps.py) applies the same columns from persistent
buffers, every filter always on: a filter no row uses is a no-op there (a mask of zeros, a top-p
cut-off of 0, which drops only what has probability 0), so both draw the same tokens.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from model.sampling.sampler import top_k_kept, warper_columns
from model.sampling.state import SamplingState

# NOTE: U clamped away from 0 keeps E = -log U finite; U < 1 in float32 keeps E > 0, so -log E is finite.
_SMALLEST_UNIFORM = torch.finfo(torch.float32).tiny


def candidate_count(states: Sequence[SamplingState], vocab_size: int) -> int:
    """K: the largest top-k of the sampling rows, or the vocabulary when one keeps every id (1 when
    no row samples: a greedy row's token is the argmax, whatever the candidates)."""
    return max((top_k_kept(state.params.top_k, vocab_size) for state in states if not state.params.greedy), default=1)


class CandidateWarper:
    """The warpers of one list of states over their K candidates. Invariant: built from the states
    alone (never from logits), so row b's scores and pick depend only on row b's logits, params
    and noise; greedy rows are at temperature 1 and are the caller's to replace by the argmax."""

    def __init__(self, states: Sequence[SamplingState], vocab_size: int, device: torch.device | str,
                 candidates: int | None = None) -> None:
        """`candidates`: K when the caller fixes it (a graph's width; at least `candidate_count`)."""
        needed = candidate_count(states, vocab_size)
        self.candidates = needed if candidates is None else candidates
        if self.candidates < needed:
            raise ValueError(f"{self.candidates} candidates cannot hold a row's top-k of {needed}")
        sampling = [state.params for state in states if not state.params.greedy]
        temperature, cutoff, top_k = warper_columns(states, self.candidates, device)
        self.temperature = temperature[:, None]  # [B, 1], 1 for greedy rows
        self.row_top_k = top_k.clamp_max(self.candidates)  # [B]: each row's own top-k, at most K
        self.row_top_p_cutoff: Tensor | None = None  # [B] 1 - top_p, None when no row uses top-p
        self.top_k_mask: Tensor | None = None  # [B, K] ascending: -inf below a row's own top-k
        if any(0 < params.top_k < self.candidates for params in sampling):
            # Ascending column j holds the (K - j)-th highest logit: kept while K - j <= top_k.
            rank = torch.arange(self.candidates, 0, -1, device=device)
            self.top_k_mask = torch.zeros(len(states), self.candidates, device=device).masked_fill_(
                rank[None, :] > top_k[:, None], float("-inf"))
        # [B, K] 1 - top_p, and -1 in the last column: the most likely token is never dropped.
        self.top_p_cutoff: Tensor | None = None
        if any(params.top_p < 1.0 for params in sampling):
            self.row_top_p_cutoff = cutoff
            self.top_p_cutoff = ascending_cutoffs(cutoff, self.candidates)
        self._last_column = last_columns(len(states), self.candidates, device)

    def ascending_scores(self, logits: Tensor) -> tuple[Tensor, Tensor]:
        """The K candidates' ids [B, K] (highest logit first) and their float32 scores [B, K] in the
        reverse order, lowest first: temperature, then top-k and top-p (-inf where filtered out)."""
        return warped_candidates(logits, self.candidates, self.temperature, self.top_k_mask, self.top_p_cutoff)

    def scores(self, logits: Tensor) -> tuple[Tensor, Tensor]:
        """The candidates' ids [B, K], highest logit first, and their warped scores in that order
        (what a test compares with the vocabulary's warpers)."""
        ids, scores = self.ascending_scores(logits)
        return ids, scores.flip(-1)

    def gumbel(self, states: Sequence[SamplingState], steps: int, vocab_size: int,
               emits: Sequence[bool] | None = None) -> Tensor:
        """Gumbel noise -log E [B, steps, K] in ascending candidate order. A seeded row draws
        [steps, its own top-k] uniforms from its generator in one call, whatever K the batch needs:
        its candidates are the first of the K (top-k is sorted) and the rest have probability 0, so
        its tokens do not depend on the batch. Those other columns hold 1/2 (any finite noise:
        -inf scores stay -inf). A row whose `emits` is False (its token is discarded) never
        advances its generator."""
        device = self.temperature.device
        uniform = torch.empty(len(states), steps, self.candidates, device=device)
        seeded = [(row, state) for row, state in enumerate(states)
                  if state.generator is not None and not state.params.greedy and (emits is None or emits[row])]
        if len(seeded) < len(states):
            uniform.uniform_()
        blocks = uniform.unbind(0) if seeded else ()  # every row's block in one call, not a select each
        for row, state in seeded:
            own = top_k_kept(state.params.top_k, vocab_size)
            if own == self.candidates:
                # The row's whole (contiguous) block, filled in place: the numbers torch.rand would
                # draw, without a temporary and two copies (a frame's start is per seeded row).
                blocks[row].uniform_(generator=state.generator)
                continue
            uniform[row, :, :own] = torch.rand(steps, own, generator=state.generator, device=device)
            uniform[row, :, own:] = 0.5
        # Drawn in descending candidate order, used ascending.
        return uniform.clamp_min_(_SMALLEST_UNIFORM).log_().neg_().log_().neg_().flip(-1)

    def pick(self, ids: Tensor, scores: Tensor, gumbel: Tensor) -> Tensor:
        """One id per row [B]: the candidate of the highest score + noise (writes into `scores`)."""
        return gumbel_pick(ids, scores, gumbel, self._last_column)


def ascending_cutoffs(cutoff: Tensor, candidates: int) -> Tensor:
    """[B, K] of each row's 1 - top_p ([B]), -1 in the last column (never dropped)."""
    columns = cutoff[:, None].repeat(1, candidates)
    columns[:, -1] = -1.0
    return columns


def last_columns(rows: int, candidates: int, device: torch.device | str) -> Tensor:
    """[B]: row b's last column in its flat [B * K] candidates."""
    return torch.arange(1, rows + 1, device=device) * candidates - 1


def warped_candidates(logits: Tensor, candidates: int, temperature: Tensor, top_k_mask: Tensor | None,
                      top_p_cutoff: Tensor | None) -> tuple[Tensor, Tensor]:
    """The K highest logits' ids [B, K] (descending) and their warped scores [B, K] ascending;
    a filter left None is not applied."""
    # NOTE: `float()` of float32 logits returns them, but through a dispatch: 15 a frame.
    values, ids = (logits if logits.dtype == torch.float32 else logits.float()).topk(candidates, dim=-1)
    scores = values.flip(-1).div_(temperature)
    if top_k_mask is not None:
        scores.add_(top_k_mask)
    if top_p_cutoff is not None:
        # Hugging Face's TopP: drop what the ascending cumulative probability keeps under 1 - top_p.
        drop = scores.softmax(dim=-1).cumsum_(dim=-1) <= top_p_cutoff
        scores.masked_fill_(drop, float("-inf"))
    return ids, scores


def gumbel_pick(ids: Tensor, scores: Tensor, gumbel: Tensor, last_column: Tensor) -> Tensor:
    """The id [B] of each row's highest score + noise (writes into `scores`)."""
    position = scores.add_(gumbel).argmax(dim=-1)
    # Ascending column j is descending K - 1 - j; `take` reads the flat ids (half the time of
    # advanced indexing, per sub-step).
    return ids.take(last_column - position)
