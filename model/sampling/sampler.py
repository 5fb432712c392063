from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from model.sampling.params import SamplingParams

# NOTE: clamping the exponential noise away from zero keeps a zero-probability token at exactly 0
# instead of 0/0 = NaN, which argmax would pick.
_SMALLEST_NOISE = torch.finfo(torch.float32).tiny


class SamplingState:
    """One request's sampling context, alive as long as the request.

    ``penalized_token_ids`` holds every id of the prompt and of the output exactly once when the
    request uses a repetition penalty, and is empty otherwise. ``generator`` exists exactly when the
    params carry a seed, so a seeded request's draws depend on nothing but its own history.
    """

    __slots__ = ("params", "generator", "_num_generated", "_seen", "_ids", "_num_ids")

    def __init__(
        self,
        params: SamplingParams,
        prompt_token_ids: Sequence[int] = (),
        device: torch.device | str = "cpu",
    ) -> None:
        self.params = params
        self.generator: torch.Generator | None = None
        if params.seed is not None:
            self.generator = torch.Generator(device=device)
            self.generator.manual_seed(params.seed)
        self._num_generated = 0
        self._seen: set[int] = set()
        self._ids = torch.empty(0, dtype=torch.int64)
        self._num_ids = 0
        if params.repetition_penalty != 1.0 and len(prompt_token_ids) > 0:
            self._ids = torch.as_tensor(prompt_token_ids, dtype=torch.int64).unique()
            self._num_ids = len(self._ids)
            self._seen = set(self._ids.tolist())

    @property
    def num_generated(self) -> int:
        return self._num_generated

    @property
    def penalized_token_ids(self) -> Tensor:
        return self._ids[: self._num_ids]

    @property
    def needs_penalty(self) -> bool:
        return self._num_ids > 0

    def append(self, token_id: int) -> None:
        self._num_generated += 1
        if self.params.repetition_penalty == 1.0 or token_id in self._seen:
            return
        self._seen.add(token_id)
        if self._num_ids == len(self._ids):
            grown = torch.empty(max(16, 2 * len(self._ids)), dtype=torch.int64)
            grown[: self._num_ids] = self._ids
            self._ids = grown
        self._ids[self._num_ids] = token_id
        self._num_ids += 1


def same_states(states: Sequence[SamplingState], kept: Sequence[SamplingState]) -> bool:
    """The same state objects, in the same order: a state lives as long as its request and its
    params never change, so what was made of `kept`'s params holds for `states` (whoever keeps
    `kept` holds them, so their ids are not reused by new objects)."""
    return len(states) == len(kept) and all(a is b for a, b in zip(states, kept))


class _Warpers:
    """What the warpers need of one list of states over one vocabulary, made once for as long as
    the same states come in the same order. Invariant: derived from the states' params alone
    (which a request keeps for its life), never from logits or history."""

    def __init__(self, states: Sequence[SamplingState], vocab_size: int, device: torch.device) -> None:
        self.states, self.vocab_size, self.device = tuple(states), vocab_size, device
        greedy = [state.params.greedy for state in states]
        self.all_greedy, self.any_greedy = all(greedy), any(greedy)
        self.greedy_rows = torch.tensor(greedy, device=device) if self.any_greedy else None
        self.use_top_k = any(0 < state.params.top_k < vocab_size for state in states)
        self.use_top_p = any(state.params.top_p < 1.0 for state in states)
        self._columns: tuple[Tensor, Tensor, Tensor] | None = None  # made at the first `apply`

    def apply(self, scores: Tensor) -> Tensor:
        """New scores: temperature, then top-k and top-p (-inf where filtered out)."""
        if self._columns is None:  # a batch of greedy rows never warps: nothing to make for it
            self._columns = warper_columns(self.states, self.vocab_size, self.device)
        return warp(scores, *self._columns, self.use_top_k, self.use_top_p)

    def fits(self, states: Sequence[SamplingState], vocab_size: int, device: torch.device) -> bool:
        return vocab_size == self.vocab_size and device == self.device and same_states(states, self.states)


class Sampler:
    """Turns one step's logits into one token per row; each row follows only its own state.

    The caller's logits are never written to. A seeded row draws all of its randomness from its
    own generator, so its tokens are the same whatever else is in the batch. What the warpers need
    of the states is kept while the same states come (a decode batch is usually the last one).
    """

    def __init__(self) -> None:
        self._warpers: _Warpers | None = None

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
        scores = apply_penalties(logits, states, stop_token_ids)
        if candidates is not None:
            scores = scores.gather(1, candidates)
        picked = self._pick(scores, states)
        return picked if candidates is None else candidates.gather(1, picked[:, None])[:, 0]

    def _pick(self, scores: Tensor, states: Sequence[SamplingState]) -> Tensor:
        warpers = self._warpers
        if warpers is None or not warpers.fits(states, scores.shape[-1], scores.device):
            warpers = self._warpers = _Warpers(states, scores.shape[-1], scores.device)
        if warpers.all_greedy:
            return scores.argmax(dim=-1)
        greedy_tokens = scores.argmax(dim=-1) if warpers.any_greedy else None
        probs = warpers.apply(scores).softmax(dim=-1)
        sampled = _exponential_race(probs, states)
        if greedy_tokens is None:
            return sampled
        return torch.where(warpers.greedy_rows, greedy_tokens, sampled)


def apply_penalties(
    logits: Tensor, states: Sequence[SamplingState], stop_token_ids: Sequence[int] = ()
) -> Tensor:
    """Returns a float32 copy of ``logits`` with repetition penalties and min_tokens masks applied."""
    # Contiguous whatever the logits' strides: the penalties index it flat.
    scores = logits.to(dtype=torch.float32, memory_format=torch.contiguous_format, copy=True)
    device = scores.device
    rows = [row for row, state in enumerate(states) if state.needs_penalty]
    if rows:
        # Every (row, id) pair as one index into the flat scores: a read and a write of those
        # entries (two-dimensional advanced indexing costs several times more on a step's batch).
        penalized = [states[row] for row in rows]
        ids = [state.penalized_token_ids for state in penalized]
        counts = torch.tensor([len(row_ids) for row_ids in ids])
        vocab_size = scores.shape[-1]
        flat = torch.cat(ids)
        # A flat index past its row would land in the next one: refuse what 2-D indexing refused.
        low, high = (int(bound) for bound in torch.aminmax(flat))
        if low < 0 or high >= vocab_size:
            raise IndexError(f"penalised token ids must lie in [0, {vocab_size}), got [{low}, {high}]")
        flat = flat.add_(torch.repeat_interleave(torch.tensor(rows) * vocab_size, counts)).to(device)
        penalty = torch.repeat_interleave(
            torch.tensor([state.params.repetition_penalty for state in penalized], dtype=torch.float32), counts
        ).to(device)
        flat_scores = scores.view(-1)
        picked = flat_scores.index_select(0, flat)
        flat_scores.index_copy_(0, flat, torch.where(picked < 0, picked * penalty, picked / penalty))
    blocked = [row for row, state in enumerate(states) if state.num_generated < state.params.min_tokens]
    if blocked and len(stop_token_ids) > 0:
        stops = torch.tensor(list(stop_token_ids), device=device)
        if len(blocked) == len(states):
            scores.index_fill_(1, stops, float("-inf"))
        else:
            scores[torch.tensor(blocked, device=device)[:, None], stops[None, :]] = float("-inf")
    return scores


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
    vocab_size = scores.shape[-1]
    scores = scores / temperature[:, None]
    if not (use_top_k or use_top_p):
        return scores
    sorted_scores, order = scores.sort(dim=-1)
    if use_top_k:
        # Ties with the k-th largest score are kept, as in Hugging Face's TopKLogitsWarper.
        kth_largest = sorted_scores.gather(1, (vocab_size - top_k)[:, None])
        sorted_scores = sorted_scores.masked_fill(sorted_scores < kth_largest, float("-inf"))
    if use_top_p:
        cumulative = sorted_scores.softmax(dim=-1).cumsum(dim=-1)
        drop = cumulative <= top_p_cutoff[:, None]
        drop[:, -1] = False
        sorted_scores = sorted_scores.masked_fill(drop, float("-inf"))
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
    for row, generator in seeded:
        noise[row].exponential_(generator=generator)
    return noise


def _exponential_race(probs: Tensor, states: Sequence[SamplingState]) -> Tensor:
    return exponential_race(probs, draw_noise(torch.empty_like(probs), states))
