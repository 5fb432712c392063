"""A depth stage's draws from persistent buffers: `SubStepSampler`'s tokens, capturable in a CUDA graph.

What `SubStepSampler.start` decides on the host from a frame's states (temperatures, each row's
top-k and top-p, greedy rows, every sub-step's noise) becomes a buffer here, filled in place by
`prepare` before each replay; `draw` is then fixed-shape tensor work with no host decision. The
candidate count K is fixed when the buffers are made: a depth stage's rows all take the
checkpoint's own sub-step top-k, so it is known before any request comes.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from model.sampling.candidates import CandidateWarper, ascending_cutoffs, gumbel_pick, last_columns, warped_candidates
from model.sampling.state import SamplingState, same_states


class GraphSubStepSampler:
    """One frame's sub-step draws for a padded batch of at most `max_rows` rows, over `candidates`
    (K) of a `vocab_size` vocabulary. Invariant: after `prepare(states, emits, padded)`, `draw` of
    sub-step k returns for the first len(states) rows exactly what `SubStepSampler.draw` returns
    after `start(states, ...)` when both draw from the same generator states (every filter is
    applied, each a no-op where the eager sampler skips it). Padding rows are greedy. Only `prepare`
    writes the buffers, so what it wrote for the last rows holds until it writes again (it skips
    what has not changed)."""

    def __init__(self, max_rows: int, steps: int, vocab_size: int, candidates: int, device: torch.device | str) -> None:
        if not 0 < candidates <= vocab_size:
            raise ValueError(f"candidates must be in [1, {vocab_size}], got {candidates}")
        self.max_rows, self.steps, self.vocab_size, self.candidates = max_rows, steps, vocab_size, candidates
        self.temperature = torch.ones(max_rows, 1, device=device)
        self.top_k_mask = torch.zeros(max_rows, candidates, device=device)
        self.top_p_cutoff = ascending_cutoffs(torch.zeros(max_rows, device=device), candidates)
        self.greedy = torch.ones(max_rows, dtype=torch.bool, device=device)
        self.gumbel = torch.zeros(max_rows, steps, candidates, device=device)
        self.last_column = last_columns(max_rows, candidates, device)
        # What the buffers were last prepared for: the rows' warper (kept, with the rows, so that
        # their ids stay theirs), the padded size, and each row's greedy flag.
        self._warper: CandidateWarper | None = None
        self._rows: tuple[SamplingState, ...] = ()
        self._padded = 0
        self._greedy_rows: list[bool] | None = None

    def prepare(self, states: Sequence[SamplingState], emits: Sequence[bool], padded: int) -> None:
        """Host side of a frame: rows [0, len(states)) from the states (a row whose `emits` is
        False draws nothing from its generator), [len(states), padded) as padding. The warpers'
        columns are written only when the rows or the padding differ from the last frame's, the
        greedy flags only when they changed, the noise every frame."""
        batch = len(states)
        if not 0 < batch <= padded <= self.max_rows or len(emits) != batch:
            raise ValueError(f"need 0 < {batch} rows <= padded {padded} <= {self.max_rows}, one emits flag each")
        if self._warper is None or padded != self._padded or not same_states(states, self._rows):
            self._prepare_rows(states, padded)
        greedy = [s.params.greedy or not e for s, e in zip(states, emits)]
        if greedy != self._greedy_rows:
            self.greedy[:batch].copy_(torch.tensor(greedy))
            self._greedy_rows = greedy
        # As SubStepSampler, which draws no noise for a frame of greedy rows only.
        if not all(greedy):
            self.gumbel[:batch].copy_(self._warper.gumbel(states, self.steps, self.vocab_size, emits))

    def _prepare_rows(self, states: Sequence[SamplingState], padded: int) -> None:
        """The warpers' columns of the states (and the padding rows')."""
        batch = len(states)
        warper = CandidateWarper(states, self.vocab_size, self.temperature.device, candidates=self.candidates)
        self.temperature[:batch].copy_(warper.temperature)
        if warper.top_k_mask is None:
            self.top_k_mask[:batch].zero_()
        else:
            self.top_k_mask[:batch].copy_(warper.top_k_mask)
        self.top_p_cutoff[:batch, :-1] = 0.0 if warper.top_p_cutoff is None else warper.top_p_cutoff[:, :-1]
        self.temperature[batch:padded].fill_(1.0)
        self.top_k_mask[batch:padded].zero_()
        self.top_p_cutoff[batch:padded, :-1] = 0.0
        self.greedy[batch:padded].fill_(True)
        self._warper, self._rows, self._padded, self._greedy_rows = warper, tuple(states), padded, None

    def draw(self, logits: Tensor, step: int) -> Tensor:
        """One token per row [P] for sub-step `step` (P = the padded batch `prepare` was given)."""
        rows = logits.shape[0]
        ids, scores = warped_candidates(logits, self.candidates, self.temperature[:rows], self.top_k_mask[:rows],
                                        self.top_p_cutoff[:rows])
        picked = gumbel_pick(ids, scores, self.gumbel[:rows, step], self.last_column[:rows])
        return torch.where(self.greedy[:rows], logits.argmax(dim=-1), picked)
