"""What an engine step costs, learned from the steps the engine runs (on the host, no tensors).

    step seconds ≈ a + b · decode rows + c · prefill tokens

Everything the engine does in a step is in the observed time (forward, sampling, the codec's
work, bookkeeping), so the codec's cost per stream is folded into b. Steps scatter around that
line (a step that decodes several streams' long codec windows takes twice the mean): a plan
that must hold through one step uses `predict_tail`, the line times the recent steps' usual
worst ratio to it; a plan over many steps uses the line plus `overrun`, how far a run of steps
has usually overrun its prediction (capacity/overrun.py), which grows far slower than the run.

The line is two fits added: the model's forward (a, b and c) and the rest of the step (a and b
only). The rest is most of a CPU step's time and scatter, and nothing in it grows with a prompt:
fitted as one line, the few steps that carry a prefill handed c whatever else slowed them (0.3
ms a token where the forward spends 0.13-0.16).
"""
from __future__ import annotations

from collections import deque

from capacity.overrun import NO_OVERRUN, Overrun, measured_overrun, nearest_rank

# NOTE: priors of a small model on a few CPU cores; they only matter for the first steps, which
# replace them within a few dozen observations (a GPU's steps are far cheaper, a slow CPU's dearer).
PRIOR_COEFFICIENTS = (0.01, 0.003, 0.0002)
# Where the prior speaks: one step of each kind it was read from (rows, prefill tokens).
_PRIOR_POINTS = ((1, 0), (16, 0), (1, 128))
# Weight of each prior point: it never decays, so a direction the data never explore (steps
# always of the same size cannot tell a from b) falls back to the prior instead of drifting.
_PRIOR_WEIGHT = 0.1
# The forward's line forgets more slowly than the rest's: one step in ten carries a prefill, and
# c must rest on more than the last few of them (at 0.97 its estimate swung 0.13-0.25 ms a token
# at 8 streams); a forward's cost changes only when the machine does.
FORWARD_FORGETTING = 0.99
# An observation above this many times the prediction is clipped to it: a garbage-collection
# pause or a neighbour's burst on a shared machine must not shut admission for a minute.
_OUTLIER_FACTOR = 4.0
# predict_tail's (and overrun's) quantile of recent steps' observed ÷ predicted time, over this
# many steps, recomputed every _TAIL_EVERY steps (sorts of a few hundred floats).
TAIL_QUANTILE = 0.9
_TAIL_WINDOW = 256
_TAIL_EVERY = 16


def _solve3(m: list[list[float]], v: list[float]) -> list[float]:
    """x with m x = v for a symmetric positive definite 3 x 3 m, by its adjugate (the engine
    refits after every step: this is a fifth of the time of an elimination in Python)."""
    (a, b, c), (_, d, e), (_, _, f) = m
    # The adjugate's entries (symmetric, as m is).
    a11, a12, a13 = d * f - e * e, c * e - b * f, b * e - c * d
    a22, a23, a33 = a * f - c * c, b * c - a * e, a * d - b * b
    det = a * a11 + b * a12 + c * a13
    v0, v1, v2 = v
    return [(a11 * v0 + a12 * v1 + a13 * v2) / det,
            (a12 * v0 + a22 * v1 + a23 * v2) / det,
            (a13 * v0 + a23 * v1 + a33 * v2) / det]


class StepCostModel:
    """The sum of two forgetting least-squares lines, the forward's and the rest of the step's,
    and the tails of the observed steps' ratio to it, of one step and of runs of steps.

    Invariant: `coefficients` (a, b, c) are never negative and `tail_factor` is at least 1, so
    neither prediction falls when rows or tokens are added (the deadline projections rely on
    that) and the tail is never below the mean; `overrun_steps` is concave, non-decreasing and
    never negative (capacity/overrun.py).
    """

    def __init__(self, forgetting: float = 0.97, prior: tuple[float, float, float] = PRIOR_COEFFICIENTS,
                 forward_forgetting: float = FORWARD_FORGETTING) -> None:
        for name, value in (("forgetting", forgetting), ("forward_forgetting", forward_forgetting)):
            if not 0 < value <= 1:
                raise ValueError(f"{name} must be in (0, 1], got {value}")
        if min(prior) < 0:
            raise ValueError(f"prior coefficients must be >= 0, got {prior}")
        # NOTE: the prior is the forward's: a step observed without its forward time counts as
        # all forward, and until the first one that has it, the rest of the step is nothing.
        self._forward = _ForgettingLine(forward_forgetting, prior, prefill_term=True)
        self._rest = _ForgettingLine(forgetting, (0.0, 0.0, 0.0), prefill_term=False)
        self.num_observed = 0
        self.coefficients = tuple(prior)
        self._ratios: deque[float] = deque(maxlen=_TAIL_WINDOW)
        self.tail_factor = 1.0
        self.overrun_steps = NO_OVERRUN  # in predicted steps

    def predict(self, decode_rows: int, prefill_tokens: int = 0) -> float:
        a, b, c = self.coefficients
        return a + b * decode_rows + c * prefill_tokens

    def predict_tail(self, decode_rows: int, prefill_tokens: int = 0) -> float:
        """What such a step takes at worst, as most recent steps went (TAIL_QUANTILE of them
        took at most this much, relative to `predict`)."""
        return self.tail_factor * self.predict(decode_rows, prefill_tokens)

    def overrun(self, decode_rows: int) -> Overrun:
        """Seconds by which the next k steps of about `decode_rows` rows may overrun their
        predicted total, as runs of recent steps went (their TAIL_QUANTILE)."""
        return self.overrun_steps.scaled(self.predict(decode_rows))

    def prefill_seconds(self, prefill_tokens: int) -> float:
        """What `prefill_tokens` add to a step."""
        return self.coefficients[2] * prefill_tokens

    def prefill_tokens_within(self, seconds: float, decode_rows: int) -> int:
        """The most prefill tokens a step with `decode_rows` rows can take and still last at most
        `seconds` (0 when even the rows alone take longer)."""
        spare = seconds - self.predict(decode_rows)
        if spare <= 0:
            return 0
        c = self.coefficients[2]
        return int(spare / c) if c > 0 else 2**31 - 1

    def observe(self, decode_rows: int, prefill_tokens: int, seconds: float,
                forward_seconds: float | None = None) -> None:
        """One step's rows, prefill tokens and time; `forward_seconds`: the part of it the
        model's forward took (None: all of it)."""
        forward_seconds = seconds if forward_seconds is None else min(max(forward_seconds, 0.0), seconds)
        predicted = self.predict(decode_rows, prefill_tokens)
        if seconds > _OUTLIER_FACTOR * predicted:
            shrink = _OUTLIER_FACTOR * predicted / seconds  # both parts alike
            seconds, forward_seconds = seconds * shrink, forward_seconds * shrink
        if predicted > 0:
            self._ratios.append(seconds / predicted)
        self._forward.observe(decode_rows, prefill_tokens, forward_seconds)
        self._rest.observe(decode_rows, 0, seconds - forward_seconds)
        (fa, fb, fc), (ra, rb, _) = self._forward.coefficients, self._rest.coefficients
        self.coefficients = (fa + ra, fb + rb, fc)
        self.num_observed += 1
        if self.num_observed % _TAIL_EVERY == 0:
            self.tail_factor = max(1.0, nearest_rank(self._ratios, TAIL_QUANTILE))
            self.overrun_steps = measured_overrun(list(self._ratios), TAIL_QUANTILE)


class _ForgettingLine:
    """Least squares of seconds ≈ a + b · rows (+ c · tokens, with `prefill_term`) with
    exponential forgetting, anchored by a prior. Invariant: `coefficients` are never negative,
    and c is 0 without `prefill_term`."""

    def __init__(self, forgetting: float, prior: tuple[float, float, float], prefill_term: bool) -> None:
        self.forgetting = forgetting
        self._always_pinned = set() if prefill_term else {2}
        self._prior_xtx = [[0.0] * 3 for _ in range(3)]
        self._prior_xty = [0.0] * 3
        for rows, tokens in _PRIOR_POINTS:
            x = (1.0, float(rows), float(tokens))
            self._accumulate(self._prior_xtx, self._prior_xty, x, sum(p * f for p, f in zip(prior, x)), _PRIOR_WEIGHT)
        self._xtx = [[0.0] * 3 for _ in range(3)]
        self._xty = [0.0] * 3
        self.coefficients = tuple(prior) if prefill_term else (prior[0], prior[1], 0.0)

    def observe(self, rows: int, tokens: int, seconds: float) -> None:
        for row in self._xtx:
            row[:] = [self.forgetting * value for value in row]
        self._xty[:] = [self.forgetting * value for value in self._xty]
        self._accumulate(self._xtx, self._xty, (1.0, float(rows), float(tokens)), seconds, 1.0)
        self._refit()

    def _refit(self) -> None:
        m = [[p + d for p, d in zip(prow, drow)] for prow, drow in zip(self._prior_xtx, self._xtx)]
        v = [p + d for p, d in zip(self._prior_xty, self._xty)]
        # A negative coefficient is noise (a step cannot get cheaper by doing more): pin it at 0
        # and refit the others, so the prediction still matches the data where they are.
        pinned = set(self._always_pinned)
        fitted = _solve3(*self._pin(m, v, pinned))
        while min(fitted) < 0:
            pinned.add(min(range(3), key=fitted.__getitem__))
            fitted = _solve3(*self._pin(m, v, pinned))
        self.coefficients = tuple(max(0.0, value) for value in fitted)

    @staticmethod
    def _pin(m: list[list[float]], v: list[float], pinned: set[int]) -> tuple[list[list[float]], list[float]]:
        """The normal equations with the coefficients in `pinned` fixed at 0."""
        m = [row[:] for row in m]
        v = v[:]
        for index in pinned:
            for k in range(3):
                m[index][k] = m[k][index] = 0.0
            m[index][index], v[index] = 1.0, 0.0
        return m, v

    @staticmethod
    def _accumulate(xtx: list[list[float]], xty: list[float], x: tuple[float, float, float], y: float,
                    weight: float) -> None:
        for i in range(3):
            xty[i] += weight * x[i] * y
            for j in range(3):
                xtx[i][j] += weight * x[i] * x[j]
