"""How long a <break> is: its `time` ("500ms", "1.5s"), else its `strength` (SSML's default,
when it has neither, is medium)."""
from __future__ import annotations

import re

from model.text.ssml.parts import SsmlError

STRENGTHS = {"none": 0.0, "x-weak": 0.1, "weak": 0.25, "medium": 0.5, "strong": 0.75, "x-strong": 1.25}
# One break longer than this is more likely a typo ("500s" for "500ms") than a wish.
MAX_BREAK = 10.0
# The sign is read so that "-1s" is refused as negative, not as unreadable.
_TIME = re.compile(r"(-?)([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ms|s)")


def break_seconds(time: str | None, strength: str | None) -> float:
    """The seconds of silence a <break> asks for; `time` wins when both are given."""
    if time is not None:
        return _time(time)
    if strength is None:
        return STRENGTHS["medium"]
    if strength not in STRENGTHS:
        raise SsmlError(f"<break strength={strength!r}> is not one of {', '.join(STRENGTHS)}")
    return STRENGTHS[strength]


def _time(time: str) -> float:
    match = _TIME.fullmatch(time.strip())
    if match is None:
        raise SsmlError(f"<break time={time!r}> is not a duration such as \"500ms\" or \"1.5s\"")
    sign, value, unit = match.groups()
    if sign:
        raise SsmlError(f"<break time={time!r}> is negative")
    seconds = float(value) / (1000 if unit == "ms" else 1)
    if seconds > MAX_BREAK:
        raise SsmlError(f"<break time={time!r}> is over {MAX_BREAK:g} seconds")
    return seconds
