from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from model.sampling.native import NativeRace
from model.sampling.penalties import PenaltyIndex, block_stops, float32_copy
from model.sampling.state import SamplingState, same_states

# NOTE: clamping the exponential noise away from zero keeps a zero-probability token at exactly 0
# instead of 0/0 = NaN, which argmax would pick.
_SMALLEST_NOISE = torch.finfo(torch.float32).tiny


class _Warpers:
    """What the warpers need of one list of states over one vocabulary, made once for as long as
    the same states come in the same order. Invariant: derived from the states' params alone
    (which a request keeps for its life), never from logits or history."""

    def __init__(self, states: Sequence[SamplingState], vocab_size: int, device: torch.device,
                 native: bool = True) -> None:
        self.states, self.vocab_size, self.device = tuple(states), vocab_size, device
        greedy = [state.params.greedy for state in states]
        self.all_greedy, self.any_greedy = all(greedy), any(greedy)
        self.greedy_rows = torch.tensor(greedy, device=device) if self.any_greedy else None
        self.use_top_k = any(0 < state.params.top_k < vocab_size for state in states)
        self.use_top_p = any(state.params.top_p < 1.0 for state in states)
        self._columns: tuple[Tensor, Tensor, Tensor] | None = None  # warper_columns, made when first needed
        self._shaped: WarpColumns | None = None  # made at the first `apply`
        self._race: NativeRace | None = None
        if native and not self.all_greedy and NativeRace.available(
                torch.device(device), [s.params.top_k for s in states if not s.params.greedy], vocab_size):
            temperature, cutoff, top_k = self.columns()
            self._race = NativeRace(temperature, top_k, cutoff if self.use_top_p else None, greedy, vocab_size)

    def columns(self) -> tuple[Tensor, Tensor, Tensor]:
        """`warper_columns` of the states (temperature, 1 - top_p, top-k), made once."""
        if self._columns is None:
            self._columns = warper_columns(self.states, self.vocab_size, self.device)
        return self._columns

    def apply(self, scores: Tensor) -> Tensor:
        """New scores: temperature, then top-k and top-p (-inf where filtered out)."""
        if self._shaped is None:  # a batch of greedy rows never warps: nothing to make for it
            self._shaped = WarpColumns(*self.columns(), self.vocab_size)
        return warp_shaped(scores, self._shaped, self.use_top_k, self.use_top_p)

    def race(self, scores: Tensor, noise: Tensor) -> Tensor | None:
        """The tokens of `pick` from these scores and noise, when the C kernel serves these rows
        and is sure of them (model/sampling/native.py); else None."""
        return None if self._race is None else self._race.race(scores, noise)

    def fits(self, states: Sequence[SamplingState], vocab_size: int, device: torch.device) -> bool:
        return vocab_size == self.vocab_size and device == self.device and same_states(states, self.states)


class Sampler:
    """Turns one step's logits into one token per row; each row follows only its own state.

    The caller's logits are never written to. A seeded row draws all of its randomness from its
    own generator, so its tokens are the same whatever else is in the batch. What the warpers and
    the penalties need of the states is kept while the same states come (a decode batch is usually
    the last one): the penalised positions then only take what each row appended since.
    """

    def __init__(self, native: bool = True) -> None:
        """`native`: let the C kernel pick where it is built and serves the rows (False: always
        the torch ops; the tokens are the same either way)."""
        self._native = native
        self._warpers: _Warpers | None = None
        self._penalties: PenaltyIndex | None = None

    def __call__(
        self,
        logits: Tensor,
        states: Sequence[SamplingState],
        stop_token_ids: Sequence[int] = (),
        candidates: Tensor | None = None,
    ) -> Tensor:
        """`candidates` [B, C] (token ids), when given, restricts each row to those tokens:
        penalties apply over the whole vocabulary first, then top-k/top-p and the draw run over
        the C candidates only, which is what makes constrained decoding cheap on a large vocab."""
        if logits.dim() != 2 or logits.shape[0] != len(states):
            raise ValueError(
                f"logits must be [batch, vocab] with one row per state; got {tuple(logits.shape)} "
                f"for {len(states)} states"
            )
        scores = float32_copy(logits)
        self._penalties_for(states, scores).apply(scores)
        block_stops(scores, states, stop_token_ids)
        if candidates is not None:
            scores = scores.gather(1, candidates)
        picked = self._pick(scores, states)
        return picked if candidates is None else candidates.gather(1, picked[:, None])[:, 0]

    def _penalties_for(self, states: Sequence[SamplingState], scores: Tensor) -> PenaltyIndex:
        """The last batch's index when these are its states, brought up to date; else a new one."""
        index = self._penalties
        if index is None or not index.fits(states, scores.shape[-1], scores.device):
            index = self._penalties = PenaltyIndex(states, scores.shape[-1], scores.device)
        index.update()
        return index

    def _pick(self, scores: Tensor, states: Sequence[SamplingState]) -> Tensor:
        warpers = self._warpers
        if warpers is None or not warpers.fits(states, scores.shape[-1], scores.device):
            warpers = self._warpers = _Warpers(states, scores.shape[-1], scores.device, self._native)
        if warpers.all_greedy:
            return scores.argmax(dim=-1)
        noise = draw_noise(torch.empty_like(scores), states)
        raced = warpers.race(scores, noise)
        if raced is not None:
            return raced
        greedy_tokens = scores.argmax(dim=-1) if warpers.any_greedy else None
        sampled = exponential_race(warpers.apply(scores).softmax(dim=-1), noise)
        if greedy_tokens is None:
            return sampled
        return torch.where(warpers.greedy_rows, greedy_tokens, sampled)


def apply_warpers(scores: Tensor, states: Sequence[SamplingState]) -> Tensor:
    """Returns new scores divided by temperature, with tokens outside top-k / top-p set to -inf.

    Greedy rows are left at temperature 1; their token is chosen before warping.
    """
    return _Warpers(states, scores.shape[-1], scores.device).apply(scores)


def top_k_kept(top_k: int, vocab_size: int) -> int:
    """How many ids a row's top-k filter keeps: top_k, or the whole vocabulary when it is off (0)
    or at least the vocabulary."""
    return top_k if 0 < top_k < vocab_size else vocab_size


def warper_columns(
    states: Sequence[SamplingState], vocab_size: int, device: torch.device | str = "cpu"
) -> tuple[Tensor, Tensor, Tensor]:
    """Per row: temperature (1 for greedy rows) and 1 - top_p as float32, top_k as int64
    (vocab_size where top-k is off), the inputs of `warp`."""
    # NOTE: 1 - top_p is computed in Python double, as Hugging Face does, so the float32 cut-off
    # rounds the same way and the kept sets match exactly.
    columns = torch.tensor(
        [
            (
                1.0 if state.params.greedy else state.params.temperature,
                1.0 - state.params.top_p,
                top_k_kept(state.params.top_k, vocab_size),
            )
            for state in states
        ],
        dtype=torch.float64,
        device=device,
    )
    temperature, top_p_cutoff, top_k = columns.unbind(dim=-1)
    return temperature.to(torch.float32), top_p_cutoff.to(torch.float32), top_k.long()


def warp(
    scores: Tensor, temperature: Tensor, top_p_cutoff: Tensor, top_k: Tensor,
    use_top_k: bool = True, use_top_p: bool = True,
) -> Tensor:
    """Temperature, then top-k, then top-p, per row ([B] tensors); `use_*` False skips a filter
    that no row uses. With both on, a row whose top_k is the vocabulary and whose cut-off is 0
    keeps every token of nonzero probability, so the result depends on no host-side decision
    (what a CUDA graph needs)."""
    return warp_shaped(scores, WarpColumns(temperature, top_p_cutoff, top_k, scores.shape[-1]), use_top_k, use_top_p)


class WarpColumns:
    """`warp`'s per-row inputs in the shapes its ops take, made once for as many calls as the same
    rows come to (`Sampler` keeps them across a decode batch's steps). Invariant: row b holds
    row b's temperature, the sorted position of its k-th largest score and its top-p cut-off,
    each [B, 1]."""

    def __init__(self, temperature: Tensor, top_p_cutoff: Tensor, top_k: Tensor, vocab_size: int) -> None:
        self.temperature = temperature[:, None]
        self.kth_position = (vocab_size - top_k)[:, None]
        self.top_p_cutoff = top_p_cutoff[:, None]


def warp_shaped(scores: Tensor, columns: WarpColumns, use_top_k: bool = True, use_top_p: bool = True) -> Tensor:
    """`warp` with its inputs already shaped."""
    scores = scores / columns.temperature
    if not (use_top_k or use_top_p):
        return scores
    sorted_scores, order = scores.sort(dim=-1)
    if use_top_k:
        # Ties with the k-th largest score are kept, as in Hugging Face's TopKLogitsWarper.
        kth_largest = sorted_scores.gather(1, columns.kth_position)
        sorted_scores.masked_fill_(sorted_scores < kth_largest, float("-inf"))
    if use_top_p:
        drop = sorted_scores.softmax(dim=-1).cumsum_(dim=-1) <= columns.top_p_cutoff
        drop[:, -1] = False  # the most likely token is never dropped
        sorted_scores.masked_fill_(drop, float("-inf"))
    return torch.empty_like(scores).scatter_(1, order, sorted_scores)


def exponential_race(probs: Tensor, noise: Tensor) -> Tensor:
    """argmax(p / E) with E ~ Exp(1) (`noise`, same shape) picks token i with probability p_i.
    Writes into `probs` and `noise`."""
    return probs.div_(noise.clamp_min_(_SMALLEST_NOISE)).argmax(dim=-1)


def draw_noise(noise: Tensor, states: Sequence[SamplingState], emits: Sequence[bool] | None = None) -> Tensor:
    """Fills `noise` [B, C] with Exp(1) draws: a seeded sampling row from its own generator (so
    its draws depend on nothing else in the batch), every other row from the default one. A row
    whose `emits` is False (its token is discarded) never advances its generator."""
    seeded = [
        (row, state.generator)
        for row, state in enumerate(states)
        if state.generator is not None and not state.params.greedy and (emits is None or emits[row])
    ]
    if len(seeded) < len(states):
        noise.exponential_()
    rows = noise.unbind(0) if seeded else ()  # every row in one call, not a select each
    for row, generator in seeded:
        rows[row].exponential_(generator=generator)
    return noise
