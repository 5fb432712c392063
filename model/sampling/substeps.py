"""Sampling for a depth stage: several draws per row in one frame, under states that do not change
between them (a code predictor's codes 1..G-1: no repetition penalty, no stop tokens, no minimum).

Per frame, `start` computes once what depends on the states alone (greedy rows, temperatures,
cut-offs, how many candidates to keep, the noise of every sub-step) and each `draw` is then a top-k
of the logits, the warpers over those candidates, and the Gumbel-max pick: argmax(scores - log E),
E ~ Exp(1), is the exponential race argmax(p / E) of `Sampler` with the log taken once per frame
instead of a softmax and a division per sub-step (the same law: log p differs from the scores by a
per-row constant).

Candidates: a row's draw only ever lands in its top-k ids, so the warpers run over the K highest
logits, sorted (K = the largest top-k of the batch, or the vocabulary when a row has top-k off),
instead of a sort of the vocabulary. Exactly the top-k filter's result, except a tie with the K-th
logit: Hugging Face's TopK keeps every tied id, this keeps K ids (float ties are measure zero).
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from model.sampling.sampler import SamplingState, warp, warper_columns

# NOTE: as Sampler's race: E clamped away from 0 keeps -log E finite.
_SMALLEST_NOISE = torch.finfo(torch.float32).tiny


class SubStepSampler:
    """Draws one token per row at each sub-step of a frame. Invariant: between `start(states, ...)`
    and the next `start`, row b's token at sub-step k depends only on row b's logits at k, row b's
    params, and row b's own generator when seeded (its noise for the whole frame is drawn in one
    call), so a row draws the same tokens whatever else shares its batch."""

    def __init__(self) -> None:
        self._states: Sequence[SamplingState] = ()
        self._all_greedy = True
        self._greedy: Tensor | None = None  # [B] bool, None when no row is greedy
        self._columns: tuple[Tensor, Tensor, Tensor] | None = None
        self._use_top_k = self._use_top_p = False
        self._candidates = 0  # K, or the vocabulary size when some row keeps every id
        self._gumbel: Tensor | None = None  # -log E [B, sub-steps, K]

    def start(self, states: Sequence[SamplingState], steps: int, vocab_size: int, device: torch.device) -> None:
        for state in states:
            if state.needs_penalty or state.params.min_tokens:
                raise ValueError("sub-step states cannot carry a repetition penalty or a minimum length")
        self._states = states
        greedy = [state.params.greedy for state in states]
        self._all_greedy = all(greedy)
        if self._all_greedy:
            self._columns = self._gumbel = None
            return
        self._greedy = torch.tensor(greedy, device=device) if any(greedy) else None
        sampling = [state.params for state in states if not state.params.greedy]
        top_ks = [params.top_k for params in sampling]
        bounded = all(0 < k < vocab_size for k in top_ks)
        self._candidates = max(top_ks) if bounded else vocab_size
        self._columns = warper_columns(states, self._candidates, device)
        self._use_top_k = any(0 < k < self._candidates for k in top_ks)
        self._use_top_p = any(params.top_p < 1.0 for params in sampling)
        noise = self._frame_noise(states, steps, vocab_size, device)
        self._gumbel = noise.clamp_min_(_SMALLEST_NOISE).log_().neg_()
        if not (self._use_top_k or self._use_top_p):
            # argmax(s / T + g) = argmax(s + T g): the temperature folds into the frame's noise.
            self._gumbel.mul_(self._columns[0][:, None, None])

    def _frame_noise(self, states: Sequence[SamplingState], steps: int, vocab_size: int,
                     device: torch.device) -> Tensor:
        """Exp(1) noise [B, steps, K] for the whole frame. A seeded row draws [steps, its own top-k]
        from its generator in one call, whatever K the batch needs: its candidates are the first
        of the K (top-k is sorted) and the rest have probability 0, so its tokens do not depend on
        the batch. Those other columns hold 1 (any finite noise: -inf scores stay -inf)."""
        noise = torch.empty(len(states), steps, self._candidates, device=device)
        seeded = [(row, state) for row, state in enumerate(states)
                  if state.generator is not None and not state.params.greedy]
        if len(seeded) < len(states):
            noise.exponential_()
        for row, state in seeded:
            own = state.params.top_k if 0 < state.params.top_k < vocab_size else vocab_size
            noise[row, :, :own] = torch.empty(steps, own, device=device).exponential_(generator=state.generator)
            noise[row, :, own:] = 1.0
        return noise

    def scores(self, logits: Tensor, step: int) -> tuple[Tensor, Tensor]:
        """Sub-step `step`'s candidate ids [B, K], highest logit first, and their warped float32
        scores (temperature, then top-k and top-p; -inf where filtered out). Greedy rows are at
        temperature 1; their token is the argmax of the logits."""
        if self._columns is None:
            raise RuntimeError("start() a frame with a sampling row first")
        scores, ids = logits.float().topk(self._candidates, dim=-1)
        temperature, top_p_cutoff, top_k = self._columns
        return ids, warp(scores, temperature, top_p_cutoff, top_k, self._use_top_k, self._use_top_p)

    def draw(self, logits: Tensor, step: int) -> Tensor:
        """One token per row [B] for sub-step `step` of the frame `start` began."""
        if len(self._states) != logits.shape[0]:
            raise ValueError(f"logits have {logits.shape[0]} rows for {len(self._states)} started states")
        if self._all_greedy:
            return logits.argmax(dim=-1)
        assert self._gumbel is not None
        if self._use_top_k or self._use_top_p:
            ids, scores = self.scores(logits, step)
        else:
            scores, ids = logits.float().topk(self._candidates, dim=-1)
        position = scores.add_(self._gumbel[:, step]).argmax(dim=-1)
        picked = ids.gather(1, position[:, None])[:, 0]
        if self._greedy is None:
            return picked
        return torch.where(self._greedy, logits.argmax(dim=-1), picked)
