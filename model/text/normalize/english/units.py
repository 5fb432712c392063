"""English units after a number, attached or not: "10 km" → "ten kilometers", "1kg" → "one
kilogram", "65 mph", "-5°C" → "minus five degrees Celsius", "50%" → "fifty percent". A unit is
read only after a number: "m" or "in" alone are not units."""
from __future__ import annotations

import re
from typing import Sequence

from model.text.normalize.english.numbers import NUMBER, is_one, number
from model.text.normalize.rules import Reading, Word

# Written unit → (singular, plural). Case matters: "mb" is not "MB".
UNITS = {
    "%": ("percent", "percent"),
    "°": ("degree", "degrees"), "°C": ("degree Celsius", "degrees Celsius"),
    "°F": ("degree Fahrenheit", "degrees Fahrenheit"),
    "km": ("kilometer", "kilometers"), "m": ("meter", "meters"), "cm": ("centimeter", "centimeters"),
    "mm": ("millimeter", "millimeters"), "mi": ("mile", "miles"), "ft": ("foot", "feet"),
    "kg": ("kilogram", "kilograms"), "g": ("gram", "grams"), "mg": ("milligram", "milligrams"),
    "lb": ("pound", "pounds"), "lbs": ("pound", "pounds"), "oz": ("ounce", "ounces"),
    "l": ("liter", "liters"), "L": ("liter", "liters"), "ml": ("milliliter", "milliliters"),
    "mL": ("milliliter", "milliliters"),
    "mph": ("mile per hour", "miles per hour"), "km/h": ("kilometer per hour", "kilometers per hour"),
    "kph": ("kilometer per hour", "kilometers per hour"),
    "ms": ("millisecond", "milliseconds"), "sec": ("second", "seconds"), "min": ("minute", "minutes"),
    "hr": ("hour", "hours"), "hrs": ("hour", "hours"),
    "KB": ("kilobyte", "kilobytes"), "MB": ("megabyte", "megabytes"), "GB": ("gigabyte", "gigabytes"),
    "TB": ("terabyte", "terabytes"), "Hz": ("hertz", "hertz"), "kHz": ("kilohertz", "kilohertz"),
    "MHz": ("megahertz", "megahertz"), "GHz": ("gigahertz", "gigahertz"),
    "W": ("watt", "watts"), "kW": ("kilowatt", "kilowatts"), "kWh": ("kilowatt hour", "kilowatt hours"),
}
# Any written unit, the longest first so that "kWh" is not read as "kW" and an "h".
UNIT = "|".join(map(re.escape, sorted(UNITS, key=len, reverse=True)))
_ATTACHED = re.compile(f"({NUMBER}) ?({UNIT})")


def _unit(value: str, unit: str) -> str:
    singular, plural = UNITS[unit]
    return singular if is_one(value) else plural


def read_unit(words: Sequence[Word], i: int) -> Reading | None:
    word = words[i]
    if match := _ATTACHED.fullmatch(word.core):
        value, unit = match.groups()
        return Reading.each(word.say(f"{number(value)} {_unit(value, unit)}"))
    said = number(word.core)
    if said is None or word.trail or i + 1 == len(words) or words[i + 1].core not in UNITS:
        return None
    unit = words[i + 1]
    return Reading.each(word.say(said), unit.say(_unit(word.core, unit.core)))
