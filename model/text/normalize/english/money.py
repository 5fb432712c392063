"""English money: "$3.50" → "three dollars and fifty cents", "£1" → "one pound", "€20m" →
"twenty million euros", "$5 million" → "five million dollars", "USD 20" → "twenty US dollars"."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from model.text.normalize.english.numbers import UNSIGNED, cardinal, is_one, number
from model.text.normalize.rules import Reading, Word, next_core


@dataclass(frozen=True, slots=True)
class Currency:
    """A currency's names: its unit, and its hundredth when it has one ("" when not)."""

    unit: str
    units: str
    cent: str = ""
    cents: str = ""


_DOLLAR = Currency("dollar", "dollars", "cent", "cents")
_EURO = Currency("euro", "euros", "cent", "cents")
_POUND = Currency("pound", "pounds", "penny", "pence")
_YEN = Currency("yen", "yen")
SYMBOLS = {"$": _DOLLAR, "€": _EURO, "£": _POUND, "¥": _YEN}
CODES = {
    "USD": Currency("US dollar", "US dollars", "cent", "cents"),
    "CAD": Currency("Canadian dollar", "Canadian dollars", "cent", "cents"),
    "AUD": Currency("Australian dollar", "Australian dollars", "cent", "cents"),
    "EUR": _EURO, "GBP": _POUND, "JPY": _YEN,
}
SCALES = {"k": "thousand", "K": "thousand", "m": "million", "M": "million", "bn": "billion", "B": "billion"}
_SCALE_WORDS = frozenset(("thousand", "million", "billion", "trillion"))
_AMOUNT = re.compile(f"([-−]?)([$€£¥])({UNSIGNED})({'|'.join(SCALES)})?")
_VALUE = re.compile(UNSIGNED)


def amount(value: str, currency: Currency, scale: str = "") -> str:
    """A written amount ("3.50", "1,000", "1.5" with scale "million") in words with its currency."""
    whole, _, fraction = value.replace(",", "").partition(".")
    if scale or (fraction and (len(fraction) > 2 or not currency.cent)):
        # "1.5 million dollars", "2.499 euros": a quantity, not units and cents.
        return f"{number(value)}{' ' + scale if scale else ''} {currency.units}"
    cents = int(fraction.ljust(2, "0")) if fraction else 0
    units = f"{cardinal(int(whole))} {currency.unit if is_one(whole) else currency.units}"
    if not cents:
        return units
    hundredths = f"{cardinal(cents)} {currency.cent if cents == 1 else currency.cents}"
    return hundredths if int(whole) == 0 else f"{units} and {hundredths}"


def read_money(words: Sequence[Word], i: int) -> Reading | None:
    word = words[i]
    if match := _AMOUNT.fullmatch(word.core):
        sign, symbol, value, suffix = match.groups()
        scale = SCALES.get(suffix or "", "")
        minus = "minus " if sign else ""
        if not scale and not word.trail and next_core(words, i).lower() in _SCALE_WORDS:
            # "$5 million": the scale is said before the currency, so the two are read as one.
            following = words[i + 1]
            said = minus + amount(value, SYMBOLS[symbol], following.core.lower())
            return Reading.whole(2, word.lead + said + following.trail)
        return Reading.each(word.say(minus + amount(value, SYMBOLS[symbol], scale)))
    if word.core in CODES and not word.trail and _VALUE.fullmatch(next_core(words, i)):
        following = words[i + 1]  # "USD 20": said "twenty US dollars"
        return Reading.whole(2, word.lead + amount(following.core, CODES[word.core]) + following.trail)
    code = next_core(words, i)
    if code in CODES and not word.trail and _VALUE.fullmatch(word.core):
        currency = CODES[code]  # "20 USD": in the order it is said
        said = amount(word.core, currency)
        units_name = currency.unit if is_one(word.core) else currency.units
        if said.endswith(units_name):
            return Reading.each(word.say(said[: -len(units_name)].rstrip()), words[i + 1].say(units_name))
        return Reading.whole(2, word.lead + said + words[i + 1].trail)
    return None
