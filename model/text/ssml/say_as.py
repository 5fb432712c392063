"""<say-as>: its content said as what `interpret-as` names, in the English normalizer's words
(model/text/normalize/english): "12/3/2026" as a date is "December third, twenty twenty-six".
Content that is not what it is said to be ("abc" as a cardinal) is refused, not guessed at.

The kinds: characters / spell-out / verbatim (letters spelled as capitals, digits by name:
"ABC1" → "A-B-C one"), cardinal / number, ordinal ("3", "3rd" → "third"), digits / telephone
(digit by digit, a pause between the groups as written, "+" → "plus"), date (`format` one of
DATE_FORMATS, default mdy; fields separated by / - . , or spaces; a month by number or name),
time (`format` hms12 or hms24), currency (a symbol or ISO code written, else the code in
`format` or `detail`)."""
from __future__ import annotations

import calendar
import re
from typing import Callable

from model.text.normalize.english.dates import MONTHS
from model.text.normalize.english.digits import grouped_digits
from model.text.normalize.english.letters import spell
from model.text.normalize.english.money import CODES, SYMBOLS, amount
from model.text.normalize.english.numbers import LONGEST_SAID, UNSIGNED, cardinal, digits, number, ordinal, year
from model.text.normalize.english.times import read_time
from model.text.normalize.rules import Word
from model.text.ssml.parts import SsmlError

DATE_FORMATS = ("mdy", "dmy", "ymd", "md", "dm", "ym", "my", "d", "m", "y")
TIME_FORMATS = ("hms12", "hms24")
# Between a group's characters nothing is said; between groups, a pause.
_CHARACTER_GROUPS = re.compile(r"[\s\-./_]+")
_LETTER_RUNS = re.compile(r"[^\W\d_]+|[0-9]+")
_ORDINAL = re.compile(r"((?:[0-9]{1,3}(?:,[0-9]{3})+|[0-9]+))(?:st|nd|rd|th)?")
_TELEPHONE = re.compile(r"\+?[\s(]*[0-9]+(?:[\s\-.()]*[0-9]+)*")
_DATE_FIELDS = re.compile(r"[\s\-/.,]+")
_DAY = re.compile(r"([0-9]{1,2})(?:st|nd|rd|th)?")
_YEAR = re.compile(r"[0-9]{1,4}")
_SECONDS = re.compile(r"([0-9]{1,2}:[0-9]{2}):([0-9]{2})(?![0-9])")
_HOUR = re.compile(r"[0-9]+")
_MERIDIEM = re.compile(r"[ap]\.?m\.?", re.IGNORECASE)
_MONEY = re.compile(rf"([-−]?)\s*(?:([$€£¥])|([A-Za-z]{{3}}))?\s*({UNSIGNED})(?:\s*([A-Za-z]{{3}}))?")
# The shortest abbreviation that names one month ("Jun" and "Jul", "Mar" and "May" differ there).
_SHORTEST_MONTH = 3
# The kinds that say a number as a quantity, which has a name only up to LONGEST_SAID digits.
_QUANTITIES = frozenset({"cardinal", "number", "ordinal", "currency"})
_DIGIT_RUN = re.compile(r"[0-9]+")
# How much of the content an error message quotes.
_QUOTED = 60


def say_as(content: str, interpret_as: str, format: str | None = None, detail: str | None = None) -> str:
    """`content` as it is said when read as `interpret_as`; raises SsmlError naming the kind and
    the content when one is not the other, or the kind or its format is unknown."""
    reader = _READERS.get(interpret_as)
    if reader is None:
        raise SsmlError(f"<say-as interpret-as={interpret_as!r}> is not one of {', '.join(_READERS)}")
    written = " ".join(content.split())
    quoted = repr(written if len(written) <= _QUOTED else written[:_QUOTED] + "…")
    if interpret_as in _QUANTITIES:
        # NOTE: such a number would be read digit by digit, which is what interpret-as="digits"
        # asks for; a quantity of a thousand digits said so is minutes of speech from one element.
        whole = _DIGIT_RUN.search(written.replace(",", ""))  # the whole part: decimals come after it
        if whole is not None and len(whole[0]) > LONGEST_SAID:
            raise SsmlError(f"<say-as interpret-as={interpret_as!r}> cannot read {quoted}: a number of "
                            f"{len(whole[0])} digits has no name as a quantity (at most {LONGEST_SAID}); "
                            "say it as digits")
    said = reader(written, format, detail) if written else None
    if said is None:
        raise SsmlError(f"<say-as interpret-as={interpret_as!r}> cannot read {quoted} as {interpret_as}")
    return said


def _characters(written: str, format: str | None, detail: str | None) -> str | None:
    groups = []
    for group in filter(None, _CHARACTER_GROUPS.split(written)):
        runs = _LETTER_RUNS.findall(group)
        # A symbol, or a digit of another script ("²", "٣"), has no name to say it by.
        if "".join(runs) != group or not all(run.isalpha() or run.isascii() for run in runs):
            return None
        groups.append(" ".join(spell(run.upper()) if run.isalpha() else digits(run) for run in runs))
    return ", ".join(groups) or None


def _cardinal(written: str, format: str | None, detail: str | None) -> str | None:
    # A written plus sign says nothing ("+5" is five); number() reads the minus.
    return number(written[1:]) if written[:1] == "+" and written[1:2].isdigit() else number(written)


def _ordinal(written: str, format: str | None, detail: str | None) -> str | None:
    match = _ORDINAL.fullmatch(written)
    return ordinal(int(match[1].replace(",", ""))) if match else None


def _telephone(written: str, format: str | None, detail: str | None) -> str | None:
    if not _TELEPHONE.fullmatch(written):
        return None
    # Parentheses around an area code group it as spaces would.
    return grouped_digits(written.replace("(", " ").replace(")", " "))


def _date(written: str, format: str | None, detail: str | None) -> str | None:
    order = format or "mdy"
    if order not in DATE_FORMATS:
        raise SsmlError(f"<say-as interpret-as=\"date\" format={format!r}> is not one of {', '.join(DATE_FORMATS)}")
    values = [value for value in _DATE_FIELDS.split(written) if value]
    if len(values) != len(order):
        return None
    fields = dict(zip(order, values))
    month = _month(fields["m"]) if "m" in fields else 1
    day = _DAY.fullmatch(fields.get("d", "1"))
    year_written = _YEAR.fullmatch(fields.get("y", "2000"))  # without a year, February has a 29th
    if month is None or day is None or year_written is None:
        return None
    if not 1 <= int(day[1]) <= calendar.monthrange(int(year_written[0]), month)[1]:
        return None
    # Said the American way whatever the written order: "December third, twenty twenty-six".
    said = " ".join(filter(None, (MONTHS[month - 1] if "m" in fields else "",
                                  ordinal(int(day[1])) if "d" in fields else "")))
    if "d" in fields and "m" not in fields:
        said = f"the {said}"
    if "y" in fields:
        said = f"{said}," if "m" in fields and "d" in fields else said
        said = f"{said} {year(int(year_written[0]))}".lstrip()
    return said


def _month(field: str) -> int | None:
    if field.isdigit():
        return int(field) if 1 <= int(field) <= 12 else None
    if len(field) < _SHORTEST_MONTH:
        return None
    named = [k for k, name in enumerate(MONTHS, 1) if name.lower().startswith(field.lower())]
    return named[0] if len(named) == 1 else None


def _time(written: str, format: str | None, detail: str | None) -> str | None:
    if format not in (None, *TIME_FORMATS):
        raise SsmlError(f"<say-as interpret-as=\"time\" format={format!r}> is not one of {', '.join(TIME_FORMATS)}")
    seconds = 0
    if match := _SECONDS.match(written):
        seconds = int(match[2])
        written = match[1] + written[match.end():]
    has_meridiem = bool(_MERIDIEM.search(written))
    if (format == "hms24" and has_meridiem) or seconds > 59:
        return None
    # A lower-case word after the time tells the rule that a dotted "p.m." does not end the
    # sentence (the content sits inside one), so its period is not said.
    words = [Word.of(w) for w in written.split()] + [Word.of("then")]
    reading = read_time(words, 0)
    if reading is None or reading.count != len(words) - 1:
        return None
    if format == "hms12" and not 1 <= int(_HOUR.search(written)[0]) <= 12:
        return None
    said = " ".join(reading.spoken)
    return said + (f" and {cardinal(seconds)} second{'s' if seconds != 1 else ''}" if seconds else "")


def _currency(written: str, format: str | None, detail: str | None) -> str | None:
    match = _MONEY.fullmatch(written)
    if match is None:
        return None
    sign, symbol, code_before, value, code_after = match.groups()
    if len([name for name in (symbol, code_before, code_after) if name]) > 1:
        return None
    if symbol:
        currency = SYMBOLS[symbol]
    else:
        code = (code_before or code_after or format or detail or "").upper()
        if not code:
            raise SsmlError(f"<say-as interpret-as=\"currency\"> names no currency in {written!r}: write a "
                            "symbol or a code, or give the code as its format")
        if code not in CODES:
            raise SsmlError(f"<say-as interpret-as=\"currency\"> has currency {code!r}; known: {', '.join(CODES)}")
        currency = CODES[code]
    return ("minus " if sign else "") + amount(value, currency)


_READERS: dict[str, Callable[[str, str | None, str | None], str | None]] = {
    "characters": _characters, "spell-out": _characters, "verbatim": _characters,
    "cardinal": _cardinal, "number": _cardinal, "ordinal": _ordinal,
    "digits": _telephone, "telephone": _telephone,
    "date": _date, "time": _time, "currency": _currency,
}
