"""One request's sampling context: its params, its generator, the ids its repetition penalty covers."""
from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from model.sampling.params import SamplingParams


class SamplingState:
    """One request's sampling context, alive as long as the request.

    The penalised ids hold every id of the prompt and of the output exactly once, in the order
    they first came (the prompt's sorted), when the request uses a repetition penalty, and none
    otherwise; they only ever grow, so a reader may keep what it has read and take the rest with
    `penalized_ids_from`. ``generator`` exists exactly when the params carry a seed, so a seeded
    request's draws depend on nothing but its own history.
    """

    __slots__ = ("params", "generator", "_num_generated", "_seen", "_ids")

    def __init__(
        self,
        params: SamplingParams,
        prompt_token_ids: Sequence[int] | Tensor = (),
        device: torch.device | str = "cpu",
    ) -> None:
        self.params = params
        self.generator: torch.Generator | None = None
        if params.seed is not None:
            self.generator = torch.Generator(device=device)
            self.generator.manual_seed(params.seed)
        self._num_generated = 0
        # NOTE: a Python list, not a tensor: the engine appends one id per stream per step, and a
        # write into a tensor is a dispatch (a list append is not); readers take only what is new.
        self._ids: list[int] = []
        if params.repetition_penalty != 1.0 and len(prompt_token_ids) > 0:
            self._ids = torch.as_tensor(prompt_token_ids, dtype=torch.int64).unique().tolist()
        self._seen = set(self._ids)

    @property
    def num_generated(self) -> int:
        return self._num_generated

    @property
    def penalized_token_ids(self) -> Tensor:
        """The penalised ids as an int64 tensor (a new one each call)."""
        return torch.tensor(self._ids, dtype=torch.int64)

    @property
    def num_penalized(self) -> int:
        return len(self._ids)

    def penalized_ids_from(self, start: int) -> list[int]:
        """The penalised ids after the first `start` (a copy)."""
        return self._ids[start:]

    @property
    def needs_penalty(self) -> bool:
        return len(self._ids) > 0

    def append(self, token_id: int) -> None:
        self._num_generated += 1
        if self.params.repetition_penalty == 1.0 or token_id in self._seen:
            return
        self._seen.add(token_id)
        self._ids.append(token_id)


def same_states(states: Sequence[SamplingState], kept: Sequence[SamplingState]) -> bool:
    """The same state objects, in the same order: a state lives as long as its request and its
    params never change, so what was made of `kept`'s params holds for `states` (whoever keeps
    `kept` holds them, so their ids are not reused by new objects)."""
    return len(states) == len(kept) and all(a is b for a, b in zip(states, kept))
