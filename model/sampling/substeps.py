"""Sampling for a depth stage: several draws per row in one frame, under states that do not change
between them (a code predictor's codes 1..G-1: no repetition penalty, no stop tokens, no minimum).

Per frame, `start` computes once what depends on the states alone (greedy rows, temperatures,
cut-offs, how many candidates to keep: a `CandidateWarper`, kept while the states stay the same)
and the noise of every sub-step, so each `draw` is a top-k of the logits, the warpers over those
candidates and the Gumbel-max pick (model/sampling/candidates.py). On the CPU that draw is one C
call where the kernel is built (model/sampling/native.py), torch ops elsewhere.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from model.sampling.candidates import CandidateWarper
from model.sampling.native import NativeCandidateDraw
from model.sampling.state import SamplingState, same_states


class SubStepSampler:
    """Draws one token per row at each sub-step of a frame. Invariant: between `start(states, ...)`
    and the next `start`, row b's token at sub-step k depends only on row b's logits at k, row b's
    params, and row b's own generator when seeded (its noise for the whole frame is drawn in one
    call), so a row draws the same tokens whatever else shares its batch."""

    def __init__(self, native: bool = True) -> None:
        """`native`: draw with the C kernel where it is built and the rows are on the CPU (False:
        always the torch ops, the definition the kernel is tested against)."""
        self._native_allowed = native
        self._states: tuple[SamplingState, ...] = ()
        self._vocab_size = 0
        self._greedy: Tensor | None = None  # [B] bool, None when no row is greedy
        self._warper: CandidateWarper | None = None  # None when every row is greedy
        self._native: NativeCandidateDraw | None = None  # the warper's rows' C draw, where used
        self._noise: Tensor | None = None  # the frame's [B, steps, K] noise, ascending candidate order
        self._gumbel: tuple[Tensor, ...] = ()  # per sub-step [B, K] views of it (the torch draws')

    def start(self, states: Sequence[SamplingState], steps: int, vocab_size: int, device: torch.device) -> None:
        if not self._same_states(states, vocab_size):
            self._prepare(states, vocab_size, device)
        if self._warper is None:
            return
        self._noise = self._warper.gumbel(states, steps, vocab_size)
        if self._native is not None:
            self._native.start(self._noise)
        else:
            # One view per sub-step, made in one call (a select per draw is a dispatch per draw).
            self._gumbel = self._noise.unbind(1)

    def _same_states(self, states: Sequence[SamplingState], vocab_size: int) -> bool:
        """The last frame's states over the same vocabulary: what `_prepare` made of them holds."""
        return vocab_size == self._vocab_size and same_states(states, self._states)

    def _prepare(self, states: Sequence[SamplingState], vocab_size: int, device: torch.device) -> None:
        """What a frame needs of the states alone: greedy rows and the candidates' warpers."""
        for state in states:
            if state.needs_penalty or state.params.min_tokens:
                raise ValueError("sub-step states cannot carry a repetition penalty or a minimum length")
        self._states, self._vocab_size = tuple(states), vocab_size
        greedy = [state.params.greedy for state in states]
        self._warper = self._greedy = self._native = self._noise = None
        self._gumbel = ()
        if all(greedy):
            return
        self._greedy = torch.tensor(greedy, device=device) if any(greedy) else None
        self._warper = CandidateWarper(states, vocab_size, device)
        if self._native_allowed and NativeCandidateDraw.available(torch.device(device), self._warper.candidates):
            warper = self._warper
            self._native = NativeCandidateDraw(warper.temperature, warper.row_top_k, warper.row_top_p_cutoff, greedy,
                                               vocab_size, warper.candidates)

    def scores(self, logits: Tensor, step: int) -> tuple[Tensor, Tensor]:
        """Sub-step `step`'s candidate ids [B, K], highest logit first, and their warped float32
        scores (temperature, then top-k and top-p; -inf where filtered out). Greedy rows are at
        temperature 1; their token is the argmax of the logits."""
        if self._warper is None:
            raise RuntimeError("start() a frame with a sampling row first")
        return self._warper.scores(logits)

    def draw(self, logits: Tensor, step: int) -> Tensor:
        """One token per row [B] for sub-step `step` of the frame `start` began."""
        if len(self._states) != logits.shape[0]:
            raise ValueError(f"logits have {logits.shape[0]} rows for {len(self._states)} started states")
        if self._warper is None:
            return logits.argmax(dim=-1)
        if self._native is not None:
            drawn = self._native.draw(logits, step)
            if drawn is not None:
                return drawn
            gumbel = self._noise[:, step]  # the kernel was unsure: the torch ops, on the same noise
        else:
            gumbel = self._gumbel[step]
        picked = self._warper.pick(*self._warper.ascending_scores(logits), gumbel)
        if self._greedy is None:
            return picked
        return torch.where(self._greedy, logits.argmax(dim=-1), picked)
