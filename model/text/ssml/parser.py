"""Reads an SSML document with expat into the parts it says (parts.py says what a part is).

A document is untrusted input. A DOCTYPE is refused as soon as it opens: it is where entities
are declared, so no entity expands ("billion laughs") and none is fetched from outside; only
XML's five predefined entities and character references are read. Elements nest at most
MAX_DEPTH deep, refused as the one too deep opens, so reading costs time linear in the
document's length and no more memory than its text.

Read: <speak> (the root), <p>, <s>, <break>, <prosody rate>, <say-as> (say_as.py), <phoneme>
(IPA, said as `[[ ph ]]` to a model that reads phonemes, else its text: SSML's fallback), <sub>
and <mark> (ignored). Everything else is refused by name, with the reason where Chorus knows it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable
from xml.parsers import expat

from model.text.ssml.breaks import break_seconds
from model.text.ssml.parts import PARAGRAPH_PAUSE, PartWriter, SpeechPart, SsmlError
from model.text.ssml.prosody import nested_rate
from model.text.ssml.say_as import say_as

SSML_NAMESPACE = "http://www.w3.org/2001/10/synthesis"
MAX_DEPTH = 32
# Attributes in these namespaces are named by their usual prefix, whatever a document binds.
_PREFIXES = {"http://www.w3.org/XML/1998/namespace": "xml", "http://www.w3.org/2001/XMLSchema-instance": "xsi"}
_ATTRIBUTES = {
    "speak": frozenset({"version", "xml:lang", "xsi:schemaLocation"}),
    "p": frozenset({"xml:lang"}),
    "s": frozenset({"xml:lang"}),
    "break": frozenset({"time", "strength"}),
    "prosody": frozenset({"rate"}),
    "say-as": frozenset({"interpret-as", "format", "detail"}),
    "phoneme": frozenset({"ph", "alphabet"}),
    "sub": frozenset({"alias"}),
    "mark": frozenset({"name"}),
}
_REQUIRED = {"say-as": "interpret-as", "phoneme": "ph", "sub": "alias", "mark": "name"}
# What these say is made of their text at their end, so they hold text only.
_TEXT_ONLY = frozenset({"say-as", "phoneme", "sub"})
_EMPTY = frozenset({"break", "mark"})
_CHILDLESS = _TEXT_ONLY | _EMPTY
_NOT_SUPPORTED = {
    "emphasis": "the models have no control for emphasis",
    "audio": "Chorus does not mix recorded audio into speech",
    "voice": "the request chooses the voice, one for the whole document",
    "lang": "the request chooses the language, one for the whole document",
    "lexicon": "give pronunciations with the request instead",
    "meta": "Chorus reads no metadata",
    "metadata": "Chorus reads no metadata",
    "desc": "it describes an <audio>, which is not supported either",
}
_NOT_SUPPORTED_PROSODY = ("pitch", "volume", "contour", "range", "duration")


def is_ssml(text: str) -> bool:
    """Whether `text` is an SSML document rather than plain text: it starts (after whitespace
    and an optional XML declaration) with a <speak> tag, or with what only a document has
    before its root, a DOCTYPE or a comment: such a document is parsed (and its DOCTYPE
    refused), never read aloud as text."""
    head = text.lstrip().removeprefix("\ufeff").lstrip()
    if head.startswith("<?xml"):
        end = head.find("?>")
        if end < 0:
            return False
        head = head[end + 2:].lstrip()
    if head.startswith(("<!DOCTYPE", "<!--")):
        return True
    after = head[len("<speak"):][:1]
    return head.startswith("<speak") and (after in (">", "/") or after.isspace())


def parse_ssml(document: str, *, phonemes: bool) -> list[SpeechPart]:
    """The parts `document` says, in order; `phonemes`: whether the model reads `[[ ]]` runs.
    Raises SsmlError for anything it does not read (module docstring)."""
    try:
        data = document.encode("utf-8")
    except UnicodeEncodeError as error:
        raise SsmlError(f"the document is not valid text: {error.reason} at character {error.start}") from None
    # The document is given as text: its own encoding declaration, if any, no longer applies.
    parser = expat.ParserCreate(encoding="UTF-8", namespace_separator=" ")
    parser.namespace_prefixes = True
    parser.buffer_text = True
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    reader = _Reader(parser, phonemes)
    parser.StartDoctypeDeclHandler = reader.located(_refuse_declarations)
    parser.EntityDeclHandler = reader.located(_refuse_declarations)
    parser.ExternalEntityRefHandler = reader.located(_refuse_declarations)
    parser.StartElementHandler = reader.located(reader.start)
    parser.EndElementHandler = reader.located(reader.end)
    parser.CharacterDataHandler = reader.located(reader.text)
    try:
        parser.Parse(data, True)
    except expat.ExpatError as error:
        raise SsmlError(f"malformed SSML: {expat.ErrorString(error.code)} "
                        f"(line {error.lineno}, column {error.offset + 1})") from None
    return reader.writer.finish()


def _refuse_declarations(*_: object) -> None:
    raise SsmlError("a DOCTYPE or entity declaration is not allowed in SSML (entities are not expanded)")


@dataclass(slots=True)
class _Open:
    """An element being read. Invariant: `content` is the text read inside it so far for a
    text-only element, None for the others; `rate` is what its text is said at; `said_before`
    is the writer's `said` when it opened."""

    name: str
    attributes: dict[str, str]
    rate: float
    content: list[str] | None
    said_before: int


class _Reader:
    """Expat's handlers for one document. Invariant: `_open` is the path from the root to the
    element being read, at most MAX_DEPTH long; `writer` has every part said before it."""

    def __init__(self, parser: expat.XMLParserType, phonemes: bool) -> None:
        self._parser = parser
        self._phonemes = phonemes
        self._open: list[_Open] = []
        self.writer = PartWriter()

    def located(self, handler: Callable[..., None]) -> Callable[..., None]:
        """`handler`, whose SsmlError says where it happened (expat knows only while a handler
        runs)."""
        def run(*args: object) -> None:
            try:
                handler(*args)
            except SsmlError as error:
                where = f"line {self._parser.CurrentLineNumber}, column {self._parser.CurrentColumnNumber + 1}"
                raise SsmlError(f"{error} ({where})") from None
        return run

    def start(self, name: str, attributes: dict[str, str]) -> None:
        if len(self._open) >= MAX_DEPTH:
            raise SsmlError(f"elements nest more than {MAX_DEPTH} deep")
        element = _element_name(name)
        parent = self._open[-1] if self._open else None
        if parent is None and element != "speak":
            raise SsmlError(f"the root element must be <speak>, not <{element}>")
        if parent is not None and element == "speak":
            raise SsmlError("<speak> may only be the root element")
        if parent is not None and parent.name in _CHILDLESS:
            holds = "text only" if parent.name in _TEXT_ONLY else "nothing"
            raise SsmlError(f"<{parent.name}> holds {holds}, not <{element}>")
        named = _checked_attributes(element, attributes)
        rate = parent.rate if parent else 1.0
        if element == "prosody" and "rate" in named:
            rate = nested_rate(rate, named["rate"])
        elif element == "break":
            self.writer.pause(break_seconds(named.get("time"), named.get("strength")))
        elif element in ("p", "s"):
            self.writer.end_sentence()  # what came before is a sentence of its own
        elif element == "phoneme":
            named["ph"] = _checked_phonemes(named)
        self._open.append(_Open(element, named, rate, [] if element in _TEXT_ONLY else None, self.writer.said))

    def text(self, data: str) -> None:
        element = self._open[-1]
        if element.content is not None:
            element.content.append(data)
        elif element.name in _EMPTY:
            if not data.isspace():
                raise SsmlError(f"<{element.name}> must be empty, not hold {data.strip()[:40]!r}")
        else:
            self.writer.say(data, element.rate)

    def end(self, name: str) -> None:
        element = self._open.pop()
        content = "".join(element.content or ())
        if element.name == "say-as":
            named = element.attributes
            said = say_as(content, named["interpret-as"], named.get("format"), named.get("detail"))
            self.writer.say(said, element.rate)
        elif element.name == "phoneme":
            self.writer.say(f"[[ {element.attributes['ph']} ]]" if self._phonemes else content, element.rate)
        elif element.name == "sub":
            self.writer.say(element.attributes["alias"], element.rate)
        elif element.name == "s":
            self.writer.end_sentence()
        elif element.name == "p":
            # A paragraph that said nothing is no paragraph: no pause after it.
            self.writer.end_sentence(PARAGRAPH_PAUSE if self.writer.said > element.said_before else 0.0)


def _element_name(name: str) -> str:
    """An element's SSML name; one in another namespace is refused."""
    namespace, local, prefix = _split(name)
    if namespace not in ("", SSML_NAMESPACE):
        raise SsmlError(f"<{prefix + ':' if prefix else ''}{local}> is in the namespace {namespace!r}, not SSML's")
    if local in _NOT_SUPPORTED:
        raise SsmlError(f"<{local}> is not supported: {_NOT_SUPPORTED[local]}")
    if local not in _ATTRIBUTES:
        raise SsmlError(f"<{local}> is not an SSML element Chorus reads; it reads {', '.join(_ATTRIBUTES)}")
    return local


def _split(name: str) -> tuple[str, str, str]:
    """Expat's name ("namespace local prefix", fewer parts without them) as those three."""
    if " " not in name:
        return "", name, ""
    namespace, local, prefix = [*name.split(" ", 2), ""][:3]
    return namespace, local, prefix


def _checked_attributes(element: str, attributes: dict[str, str]) -> dict[str, str]:
    """`attributes` by their written names ("xml:lang"), each one that `element` takes."""
    named = {}
    for name, value in attributes.items():
        namespace, local, prefix = _split(name)
        if namespace:
            name = f"{_PREFIXES.get(namespace, prefix)}:{local}"
        if element == "prosody" and name in _NOT_SUPPORTED_PROSODY:
            raise SsmlError(f"<prosody {name}> is not supported: the models control only the rate")
        if name not in _ATTRIBUTES[element]:
            raise SsmlError(f"<{element}> has no attribute {name!r}; it takes {', '.join(sorted(_ATTRIBUTES[element]))}")
        named[name] = value
    required = _REQUIRED.get(element)
    if required and required not in named:
        raise SsmlError(f"<{element}> needs the attribute {required!r}")
    return named


def _checked_phonemes(named: dict[str, str]) -> str:
    """A <phoneme>'s `ph`, its whitespace single spaces; IPA is the only alphabet read."""
    alphabet = named.get("alphabet", "ipa")
    if alphabet != "ipa":
        raise SsmlError(f"<phoneme alphabet={alphabet!r}> is not supported: only \"ipa\" is")
    ph = " ".join(named["ph"].split())
    if not ph:
        raise SsmlError("<phoneme ph=\"\"> is empty")
    if "[" in ph or "]" in ph:
        raise SsmlError(f"<phoneme ph={ph!r}> may not hold \"[\" or \"]\" (they delimit phonemes in the text)")
    return ph
