"""Sampling a padded batch from persistent buffers: `Sampler`'s choices, capturable in a CUDA graph.

A decode graph replays fixed kernels on fixed memory, so everything `Sampler` decides on the host
from the requests' states (temperatures, filters, penalties, seeds, min_tokens) becomes a buffer
here, filled in place before each replay by `GraphSampler.prepare`:

    per row [max_rows]      temperature, 1 - top_p, top_k, repetition penalty, greedy, stop blocked,
                            emits (its token is real), slot (its stream's row of the seen bitmap)
    noise [max_rows, C]     Exp(1) draws (a seeded request's from its own generator)
    seen [slots + 1, V]     token ids each stream has seen, for repetition penalties

`GraphSampler.sample` is then fixed-shape tensor work with no host synchronisation, which also
records the sampled tokens in the seen bitmap.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from model.sampling.sampler import draw_noise, exponential_race, warp, warper_columns
from model.sampling.state import SamplingState, same_states


class SeenTokens:
    """One bitmap row per slot of the token ids a stream has seen (prompt and outputs).

    Invariant: a slot owned by a state whose params use a repetition penalty has exactly the ids
    of that state's `penalized_token_ids` set, plus the tokens sampled for it since (which its
    state appends when they are accepted). Row `scratch` (the last) belongs to no stream: padding
    rows point there. A state without a slot gets one (filled from its history) when it next
    needs one, evicting a state that is not in that batch.
    """

    def __init__(self, num_slots: int, vocab_size: int, device: torch.device | str) -> None:
        if num_slots < 1:
            raise ValueError(f"num_slots must be >= 1, got {num_slots}")
        self.bits = torch.zeros(num_slots + 1, vocab_size, dtype=torch.bool, device=device)
        self.scratch = num_slots
        self._owner: list[SamplingState | None] = [None] * num_slots
        self._slot_of: dict[SamplingState, int] = {}

    def slot(self, state: SamplingState) -> int | None:
        return self._slot_of.get(state)

    def slots_for(self, states: Sequence[SamplingState]) -> list[int]:
        """A slot for each state (at most num_slots, all distinct)."""
        if len(states) > len(self._owner):
            raise ValueError(f"{len(states)} rows, only {len(self._owner)} slots")
        batch = set(states)
        slots = []
        for state in states:
            slot = self._slot_of.get(state)
            if slot is None:
                slot = self._take(batch)
                self._owner[slot], self._slot_of[state] = state, slot
                self._fill(slot, state)
            slots.append(slot)
        return slots

    def mark(self, states: Sequence[SamplingState], tokens: Tensor) -> None:
        """Records tokens sampled outside a graph ([B], one per state) for the states with a slot."""
        rows = [(row, slot) for row, state in enumerate(states) if (slot := self._slot_of.get(state)) is not None]
        if rows:
            index, slots = zip(*rows)
            picked = tokens[torch.tensor(index, device=tokens.device)].to(self.bits.device)
            self.bits[torch.tensor(slots, device=self.bits.device), picked] = True

    def release(self, state: SamplingState) -> None:
        slot = self._slot_of.pop(state, None)
        if slot is not None:
            self._owner[slot] = None

    def _take(self, batch: set[SamplingState]) -> int:
        for slot, owner in enumerate(self._owner):
            if owner is None:
                return slot
        for slot, owner in enumerate(self._owner):
            if owner not in batch:
                del self._slot_of[owner]
                return slot
        raise AssertionError("unreachable: fewer states than slots")

    def _fill(self, slot: int, state: SamplingState) -> None:
        row = self.bits[slot]
        row.zero_()
        if state.needs_penalty:
            row[state.penalized_token_ids.to(row.device)] = True


class GraphSampler:
    """Picks one token per row of a padded batch (at most `max_rows`) from its buffers only.

    Invariant: after `prepare(states, ...)`, `sample(logits, candidates)` returns, for the first
    len(states) rows, exactly the tokens `Sampler()(logits, states, stop_token_ids, candidates)`
    returns when both draw their noise from the same generator states (it applies the same
    operations; penalties and the stop block are applied to the candidates only, which changes
    no candidate's score). Padding rows are greedy, emit nothing and touch only the scratch slot.
    Only `prepare` writes the per-row parameter buffers, so what it wrote for the last rows holds
    until it writes again (it skips what has not changed); `sample` clamps the noise in place,
    which `prepare` draws anew every step.
    """

    def __init__(self, max_rows: int, vocab_size: int, stop_token_ids: Sequence[int],
                 num_candidates: int | None, device: torch.device | str) -> None:
        self.max_rows = max_rows
        self.vocab_size = vocab_size
        self.width = num_candidates or vocab_size  # the columns the draw runs over
        self.seen = SeenTokens(max_rows, vocab_size, device)
        self.stop_ids = torch.tensor(list(stop_token_ids), dtype=torch.long, device=device)
        self._stop_columns = torch.zeros(1, vocab_size, dtype=torch.bool, device=device)
        self._stop_columns[0, self.stop_ids] = True
        self.temperature = torch.ones(max_rows, device=device)
        self.top_p_cutoff = torch.zeros(max_rows, device=device)
        self.top_k = torch.full((max_rows,), self.width, dtype=torch.long, device=device)
        self.penalty = torch.ones(max_rows, device=device)
        self.greedy = torch.ones(max_rows, dtype=torch.bool, device=device)
        self.block_stop = torch.zeros(max_rows, dtype=torch.bool, device=device)
        self.emits = torch.zeros(max_rows, dtype=torch.bool, device=device)
        self.slots = torch.full((max_rows,), self.seen.scratch, dtype=torch.long, device=device)
        self.noise = torch.ones(max_rows, self.width, device=device)
        self.tokens = torch.zeros(max_rows, dtype=torch.long, device=device)
        # What the buffers were last prepared for: the rows (kept, so that their ids stay theirs),
        # the padded size, and each row's (stop blocked, emits).
        self._rows: tuple[SamplingState, ...] = ()
        self._padded = 0
        self._flags: list[tuple[bool, bool]] | None = None

    def prepare(self, states: Sequence[SamplingState], emits: Sequence[bool], padded: int) -> None:
        """Host side of a step: rows [0, len(states)) from the states, [len(states), padded) as padding.
        What depends on the states' params alone is written only when the rows or the padding
        differ from the last call's (a decode batch is usually the last one again); which rows
        emit and which may not stop yet only when they changed; the noise every time."""
        batch = len(states)
        if not 0 < batch <= padded <= self.max_rows or len(emits) != batch:
            raise ValueError(f"need 0 < {batch} rows <= padded {padded} <= {self.max_rows}, one emits flag each")
        if padded != self._padded or not same_states(states, self._rows):
            self._prepare_rows(states, padded)
        flags = [(s.num_generated < s.params.min_tokens, bool(emit)) for s, emit in zip(states, emits)]
        if flags != self._flags:
            self.block_stop[:batch], self.emits[:batch] = torch.tensor(flags, dtype=torch.bool).to(
                self.emits.device).unbind(1)
            self._flags = flags
        # As Sampler, which samples only the rows that emit: an all-greedy batch draws nothing.
        if not all(s.params.greedy for s, emit in zip(states, emits) if emit):
            draw_noise(self.noise[:batch], states, emits)

    def _prepare_rows(self, states: Sequence[SamplingState], padded: int) -> None:
        """The buffers that follow from the states' params (and the padding rows')."""
        batch = len(states)
        device = self.temperature.device
        temperature, cutoff, top_k = warper_columns(states, self.width, device)
        self.temperature[:batch].copy_(temperature)
        self.top_p_cutoff[:batch].copy_(cutoff)
        self.top_k[:batch].copy_(top_k)
        self.greedy[:batch].copy_(torch.tensor([s.params.greedy for s in states]))
        self.penalty[:batch].copy_(torch.tensor([s.params.repetition_penalty for s in states]))
        self.slots[:batch].copy_(torch.tensor(self.seen.slots_for(states)))
        for buffer, value in ((self.temperature, 1.0), (self.top_p_cutoff, 0.0), (self.top_k, self.width),
                              (self.penalty, 1.0), (self.greedy, True), (self.block_stop, False),
                              (self.emits, False), (self.slots, self.seen.scratch)):
            buffer[batch:padded].fill_(value)
        self._rows, self._padded, self._flags = tuple(states), padded, None

    def sample(self, logits: Tensor, candidates: Tensor | None = None) -> Tensor:
        """Tokens [P] (a view of `self.tokens`) for logits [P, V] and optional candidates [P, C]
        (token ids, C = num_candidates); P is the padded batch `prepare` was given."""
        rows = logits.shape[0]
        slots = self.slots[:rows]
        if candidates is None:
            scores = logits.to(torch.float32, copy=True)
            seen = self.seen.bits[slots]
            is_stop = self._stop_columns
        else:
            scores = logits.gather(1, candidates).float()
            seen = self.seen.bits[slots[:, None], candidates]
            is_stop = (candidates[:, :, None] == self.stop_ids).any(dim=-1)
        penalty = self.penalty[:rows, None]
        scores = torch.where(seen, torch.where(scores < 0, scores * penalty, scores / penalty), scores)
        scores = scores.masked_fill(is_stop & self.block_stop[:rows, None], float("-inf"))
        greedy_tokens = scores.argmax(dim=-1)
        probs = warp(scores, self.temperature[:rows], self.top_p_cutoff[:rows], self.top_k[:rows]).softmax(dim=-1)
        picked = torch.where(self.greedy[:rows], greedy_tokens, exponential_race(probs, self.noise[:rows]))
        tokens = picked if candidates is None else candidates.gather(1, picked[:, None])[:, 0]
        # Seen from now on (rows that emit; the others keep their bits).
        self.seen.bits[slots, tokens] = self.seen.bits[slots, tokens] | self.emits[:rows]
        self.tokens[:rows].copy_(tokens)
        return self.tokens[:rows]
