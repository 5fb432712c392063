"""The speaking rate a <prosody rate> asks for: a name ("slow"), a percentage of the rate around
it ("150%") or a plain multiplier ("1.2"). Nested rates multiply; the product is a multiplier on
the request's own speed, and must stay in RATE_RANGE. Pitch and volume are not supported: the
models have no control for them."""
from __future__ import annotations

import re

from model.text.ssml.parts import SsmlError

RATES = {"x-slow": 0.5, "slow": 0.75, "medium": 1.0, "fast": 1.25, "x-fast": 1.75, "default": 1.0}
RATE_RANGE = (0.25, 4.0)
# Digits only: float() alone would take "nan", "inf" and "1e9".
_NUMBER = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(%?)")


def nested_rate(outer: float, value: str) -> float:
    """The rate inside a <prosody rate=`value`> that sits in text said at `outer`."""
    if value in RATES:
        multiplier = RATES[value]
    elif match := _NUMBER.fullmatch(value.strip()):
        multiplier = float(match[1]) / (100 if match[2] else 1)
    else:
        raise SsmlError(f"<prosody rate={value!r}> is not one of {', '.join(RATES)}, a percentage "
                        "(\"150%\") or a number (\"1.2\")")
    rate = outer * multiplier
    low, high = RATE_RANGE
    if not low <= rate <= high:
        raise SsmlError(f"<prosody rate={value!r}> makes the rate {rate:g}; it must be between {low:g} and {high:g}")
    return rate
