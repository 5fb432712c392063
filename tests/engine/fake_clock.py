"""A clock for engine-core tests: time passes only when the model runs, by a fixed cost per
step, so admission, the deadline order and adaptive chunking decide exactly as they would in
production, and the same in every run."""
from __future__ import annotations

# Prefill tokens of the steps `StepClock.attach` tells the core it has seen: the clock charges
# none, so admission learns that a prompt costs nothing beyond its step.
_HISTORY_PROMPT_TOKENS = (0, 64)
_HISTORY_ROUNDS = 4


class StepClock:
    """Seconds that move only through `advance` (and, once attached to a core, by `step_cost`
    of the step's audio for every model run). Invariant: never goes back."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"a clock never goes back (advance by {seconds})")
        self.now += seconds

    def attach(self, core, step_cost: float = 0.05, row_cost: float = 0.002, history: bool = True) -> None:
        """Every model run of `core` takes (step_cost + row_cost per decode row) times the audio
        one step makes (so from step_cost + row_cost * rows >= 1 on, slower than real time): the
        defaults keep 32 streams well inside real time, so admission starts everything a test
        adds at once, as on an idle machine.

        With `history`, the core's step-cost model has seen steps of every size at these costs
        (as the engine would have after running a while on such a machine), so admission plans
        with them from the first request on; without it, admission starts from the model's
        prior (a small model's step on a few CPU cores, slower than real time for tiny-random's
        82 outputs a second) and learns the clock's costs only from the steps it runs."""
        step_audio = 1.0 / core.limits.outputs_per_second
        execute = core.runner.execute

        def seconds(rows: int) -> float:
            return step_audio * (step_cost + row_cost * rows)

        def timed(chunks, streams):
            result = execute(chunks, streams)
            self.advance(seconds(sum(1 for c in chunks if c.num_new_tokens == 1)))
            return result

        core.runner.execute = timed
        if history:
            # NOTE: what the core itself observes of a step on this clock: the forward takes no
            # time of its own (the clock moves once the model has run), the step all of it.
            for _ in range(_HISTORY_ROUNDS):
                for rows in range(core.config.scheduler.max_num_seqs + 1):
                    for tokens in _HISTORY_PROMPT_TOKENS:
                        if rows or tokens:  # a step with neither never runs
                            core.step_cost.observe(rows, tokens, seconds(rows), forward_seconds=0.0)
