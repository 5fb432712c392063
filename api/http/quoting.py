"""How an error message, in either API's shape, quotes a value taken from the request."""
from __future__ import annotations

# A value from the request is quoted in a message up to this many characters.
QUOTED_CHARS = 64


def quoted(value: object, limit: int = QUOTED_CHARS) -> str:
    """`value` as an error message shows it: a string quoted and escaped as `repr` does (so a
    control character reads as its escape), at most `limit` characters of it, then "…"; any
    other value (a socket message's `type` may be a number, a list, missing) as its `repr`, cut
    the same way."""
    if isinstance(value, str):
        return repr(value[:limit]) + ("…" if len(value) > limit else "")
    shown = repr(value)
    return shown[:limit] + ("…" if len(shown) > limit else "")
