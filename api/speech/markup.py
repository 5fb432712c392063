"""A request's input as the parts its speech is planned from: plain text, or SSML when it starts
with `<speak>` (model/text/ssml), with the pronunciations in force (the server's lexicon and the
request's own, model/text/lexicon) applied, and every phoneme the model is to say checked first.

Plain text without a lexicon is one part, read as it came: nothing here costs it more than two
substring checks.
"""
from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Iterable, Mapping

from api.speech.errors import INVALID_PRONUNCIATION, INVALID_SSML, SpeechError
from model.families.base import PhonemesRefused, PromptFrontend
from model.text.inline_phonemes import phoneme_runs
from model.text.lexicon import Lexicon, LexiconError
from model.text.ssml import SpeechPart, SsmlError, is_ssml, parse_ssml

PRONUNCIATIONS = "pronunciations"
logger = logging.getLogger("chorus.api")


def server_lexicon(path: str | None, frontend: PromptFrontend) -> Lexicon:
    """The lexicon of `--lexicon FILE` (empty without one), for this model: an entry whose
    phonemes the model cannot say is an error (the server does not start with a lexicon it would
    silently ignore), except on a model that reads no phonemes at all, which keeps only the
    file's `say_as` entries and logs how many it left out. Raises ValueError naming the entry."""
    if path is None:
        return Lexicon.of(())
    lexicon = Lexicon.read(Path(path).expanduser())
    with_phonemes = lexicon.with_phonemes()
    if with_phonemes and not frontend.reads_phonemes:
        logger.warning("lexicon %s: %d of its %d entries give phonemes, which %s cannot read; they are left out",
                       path, len(with_phonemes), len(lexicon), frontend.model_name)
        return lexicon.without_phonemes()
    for entry in with_phonemes:
        try:
            frontend.check_phonemes(entry.phonemes)
        except PhonemesRefused as exc:
            raise ValueError(f"lexicon {path}: the entry for {entry.word!r}: {exc}") from None
    return lexicon


def pronunciations_in_force(server: Lexicon, entries: Iterable[Mapping[str, object]] | None,
                            frontend: PromptFrontend) -> Lexicon:
    """The server's lexicon with a request's `pronunciations` over it (theirs win for the same
    word). Raises SpeechError (400, param "pronunciations") naming a bad entry: malformed, or
    phonemes the model cannot say (any, for a model that reads text)."""
    if not entries:
        return server
    try:
        extra = Lexicon.of(entries)
    except LexiconError as exc:
        raise SpeechError(400, INVALID_PRONUNCIATION, f"Invalid value for 'pronunciations': {exc}",
                          param=PRONUNCIATIONS) from None
    for entry in extra.with_phonemes():
        try:
            frontend.check_phonemes(entry.phonemes)
        except PhonemesRefused as exc:
            hint = "" if frontend.reads_phonemes else "; give 'say_as' (a respelling) instead"
            raise SpeechError(400, INVALID_PRONUNCIATION, f"Invalid value for 'pronunciations': the entry for "
                              f"{entry.word!r}: {exc}{hint}", param=PRONUNCIATIONS) from None
    return server.merged(extra)


def speech_parts(text: str, frontend: PromptFrontend, lexicon: Lexicon, model_speed: float) -> list[SpeechPart]:
    """`text` as the parts to speak. SSML is parsed (a malformed or unsupported document is a 400
    naming what is wrong, never read aloud); the lexicon rewrites the words it knows; a phoneme
    run the model cannot say, or a rate the model cannot speak at, is a 400."""
    reads_phonemes = frontend.reads_phonemes
    if is_ssml(text):
        try:
            parts = parse_ssml(text, phonemes=reads_phonemes)
        except SsmlError as exc:
            raise SpeechError(400, INVALID_SSML, f"Invalid SSML in 'input': {exc}", param="input") from None
        _check_rates(parts, frontend, model_speed)
    else:
        parts = [SpeechPart(text)]
    if lexicon:
        parts = [dataclasses.replace(part, text=lexicon.apply(part.text, phonemes=reads_phonemes)) for part in parts]
    if reads_phonemes:
        check_phoneme_runs(frontend, (part.text for part in parts))
    return parts


def check_phoneme_runs(frontend: PromptFrontend, texts: Iterable[str]) -> None:
    """Raises SpeechError (400, param "input") for the first `[[ ]]` run the model cannot say."""
    for text in texts:
        for run in phoneme_runs(text):
            try:
                frontend.check_phonemes(run)
            except PhonemesRefused as exc:
                raise SpeechError(400, "invalid_value", f"Invalid value for 'input': {exc}", param="input") from None


def _check_rates(parts: list[SpeechPart], frontend: PromptFrontend, model_speed: float) -> None:
    """A part's rate is spoken by the model itself (its prompt's durations), so together with the
    request's speed it must lie in the model's `speed_range`."""
    low, high = frontend.speed_range
    for part in parts:
        if part.rate == 1.0:
            continue
        if low == high:
            raise SpeechError(400, INVALID_SSML, f"Invalid SSML in 'input': <prosody rate> needs a model that "
                              f"controls its own rate; {frontend.model_name} does not (use the request's speed)",
                              param="input")
        speed = model_speed * part.rate
        if not low <= speed <= high:
            raise SpeechError(400, INVALID_SSML, f"Invalid SSML in 'input': a <prosody rate> of {part.rate:g} at "
                              f"speed {model_speed:g} makes {speed:g}; {frontend.model_name} speaks at "
                              f"{low:g}-{high:g}", param="input")
