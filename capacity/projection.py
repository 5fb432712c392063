"""Projecting streams' slack forward: will every listener keep hearing audio until its stream ends?

Every running stream gains `step_audio` seconds of audio per step and its listener plays on, so
over k more steps a stream's slack changes by

    gain(k) = k · step_audio - (seconds the next k steps take)

The same for every stream. The seconds are the predicted steps' plus their `Overrun`, how far
k steps in a row may run over their prediction at their usual worst (capacity/overrun.py:
concave in k, and charged once, not step by step). Steps get cheaper as streams finish, so
gain is convex in k (it falls while steps are slower than real time, then rises) and a stream's
lowest slack on its way to its end is at the lowest point of gain within its remaining steps.
"""
from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import Callable, Sequence

from capacity.overrun import NO_OVERRUN, Overrun

StepSeconds = Callable[[int], float]  # decode rows → seconds of one step


@dataclass(slots=True, frozen=True)
class StreamOutlook:
    """One stream as the projection sees it. Invariant: steps are counts >= 0.

    A playing stream (`first_audio_steps == 0`): `ahead` is the audio it has generated beyond
    its listener's position, in seconds. A stream not playing yet: `ahead` is the time left
    until its first-audio deadline, and its first audio needs `first_audio_steps` more steps;
    its listener starts then, holding the audio of those steps and of the `generated_steps`
    before them. `prefill_seconds`: what the part of its prompt not yet computed adds to a step;
    the projection charges it to the next.
    """

    ahead: float
    remaining_steps: int
    first_audio_steps: int = 0
    prefill_seconds: float = 0.0
    generated_steps: int = 0

    @property
    def is_playing(self) -> bool:
        return self.first_audio_steps == 0


class Timeline:
    """Wall seconds of the next k steps, if the streams that have `remaining` steps left each
    take one per step until their end (the newest arrivals' prefill adds `extra_seconds` to the
    first step), plus `overrun(k)`. Piecewise linear and concave in k: it bends where a stream
    ends and where the overrun does."""

    def __init__(self, remaining: Sequence[int], step_seconds: StepSeconds, step_audio: float,
                 extra_seconds: float = 0.0, overrun: Overrun = NO_OVERRUN) -> None:
        self.step_audio = step_audio
        self.overrun = overrun
        ends = sorted(r for r in remaining if r > 0)
        self.steps = [0]
        self.seconds = [extra_seconds]
        active = len(ends)
        for index, end in enumerate(ends):
            if end != self.steps[-1]:
                self.seconds.append(self.seconds[-1] + (end - self.steps[-1]) * step_seconds(active))
                self.steps.append(end)
            active = len(ends) - index - 1
        # The lowest point of gain over the bends (and the first step): where the later steps
        # start to be faster than real time.
        candidates = [1] + self.steps[1:] + [k for k in overrun.bends if k > 1]
        self.lowest_step = min(candidates, key=self.gain)

    @property
    def last_step(self) -> int:
        return self.steps[-1]

    @property
    def end(self) -> float:
        """Seconds until every stream has ended."""
        return self.elapsed(self.last_step)

    def elapsed(self, k: int) -> float:
        """Seconds until k more steps have run (k at most `last_step`, or beyond it for nothing)."""
        return self.predicted(k) + self.overrun(k)

    def predicted(self, k: int) -> float:
        """`elapsed` without the overrun."""
        i = bisect.bisect_left(self.steps, k)
        if i == 0:
            return self.seconds[0]
        if i == len(self.steps):
            return self.seconds[-1]
        lo, hi = self.steps[i - 1], self.steps[i]
        return self.seconds[i - 1] + (self.seconds[i] - self.seconds[i - 1]) * (k - lo) / (hi - lo)

    def gain(self, k: int) -> float:
        return k * self.step_audio - self.elapsed(k)

    def lowest_gain(self, first: int, last: int) -> float:
        """The lowest gain over steps first..last (first <= last); gain is convex, so it is at
        `lowest_step` when that lies inside, else at the nearer end."""
        return self.gain(min(max(self.lowest_step, first), last))

    def gain_after(self, first: int, k: int) -> float:
        """Gain over steps first+1..k: audio made minus their predicted time and the overrun of
        a run of k - first steps (a run that starts late overruns no less than one from now)."""
        return (k - first) * self.step_audio - (self.predicted(k) - self.predicted(first)) - self.overrun(k - first)

    def lowest_gain_after(self, first: int, last: int) -> float:
        """The lowest `gain_after(first, k)` over k in first..last (first <= last): convex in k,
        so at a bend (a stream's end, or the overrun's, `first` steps on) or an end."""
        candidates = [first, last, *(k for k in self.steps if first < k < last),
                      *(first + k for k in self.overrun.bends if first + k < last)]
        return min(self.gain_after(first, k) for k in candidates)


def lowest_slack(outlook: StreamOutlook, timeline: Timeline) -> float:
    """The least slack `outlook` will have until its end on `timeline`; for a stream not playing
    yet, also the margin by which its first audio beats its deadline (the smaller of the two)."""
    if outlook.remaining_steps <= 0:
        return math.inf
    if outlook.is_playing:
        return outlook.ahead + timeline.lowest_gain(1, outlook.remaining_steps)
    first = min(outlook.first_audio_steps, outlook.remaining_steps)
    # NOTE: its listener starts at its first audio holding the audio of every step until then;
    # from there on its slack is the gain after that step, whenever that step comes.
    held = (outlook.generated_steps + first) * timeline.step_audio
    playing = held + timeline.lowest_gain_after(first, outlook.remaining_steps)
    return min(outlook.ahead - timeline.elapsed(first), playing)


def timeline_of(streams: Sequence[StreamOutlook], step_seconds: StepSeconds, step_audio: float,
                overrun: Overrun = NO_OVERRUN) -> Timeline:
    """The timeline `streams` run on, their prompts' prefill charged to the first step."""
    return Timeline([s.remaining_steps for s in streams], step_seconds, step_audio,
                    sum(s.prefill_seconds for s in streams), overrun)


def all_keep_slack(streams: Sequence[StreamOutlook], step_seconds: StepSeconds, step_audio: float,
                   margin: float = 0.0, overrun: Overrun = NO_OVERRUN) -> bool:
    """Whether every stream keeps more than `margin` seconds of slack (and meets its first-audio
    deadline by that much) until its end."""
    timeline = timeline_of(streams, step_seconds, step_audio, overrun)
    return all(lowest_slack(s, timeline) > margin for s in streams)


def advance(outlook: StreamOutlook, k: int, timeline: Timeline) -> StreamOutlook:
    """`outlook` after k >= 1 more steps of `timeline` (k below its remaining steps): its
    prompt is computed by then."""
    remaining = outlook.remaining_steps - k
    if outlook.is_playing:
        return StreamOutlook(outlook.ahead + timeline.gain(k), remaining)
    if k < outlook.first_audio_steps:
        return StreamOutlook(outlook.ahead - timeline.elapsed(k), remaining, outlook.first_audio_steps - k,
                             generated_steps=outlook.generated_steps + k)
    first = outlook.first_audio_steps
    held = (outlook.generated_steps + first) * timeline.step_audio
    return StreamOutlook(held + timeline.gain_after(first, k), remaining)


def start_delay(committed: Sequence[StreamOutlook], fits: Callable[[list[StreamOutlook], float], bool],
                step_seconds: StepSeconds, step_audio: float, overrun: Overrun = NO_OVERRUN) -> float | None:
    """Seconds until newcomers can start: the earliest moment a committed stream ends (or now)
    at which `fits(the streams still running then, seconds from now)` holds; None if it holds
    at none of them, not even once every committed stream has ended."""
    if fits(list(committed), 0.0):
        return 0.0
    timeline = timeline_of(committed, step_seconds, step_audio, overrun)
    for k in timeline.steps[1:]:
        at = timeline.elapsed(k)
        if fits([advance(s, k, timeline) for s in committed if s.remaining_steps > k], at):
            return at
    return None


def realtime_capacity(step_seconds: StepSeconds, step_audio: float, max_streams: int) -> int:
    """How many streams, at most `max_streams`, the engine can step faster than they play."""
    low, high = 0, max_streams
    while low < high:  # step_seconds never falls as rows are added
        mid = (low + high + 1) // 2
        if step_seconds(mid) < step_audio:
            low = mid
        else:
            high = mid - 1
    return low
