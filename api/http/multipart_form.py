"""A multipart/form-data body already in memory → Starlette's FormData, in one synchronous call
that runs on a worker thread (api/http/parsed_body.py), never on the event loop.

Starlette parses a form as its body streams in, on the event loop, and spools each file to a
temporary file; here the body has been read whole within its route's limit
(api/http/body_limit.py) before the route runs, so it is parsed at once, its file parts kept in
memory (each at most the body's size, which is bounded), with a bound on the number of parts and
on the size of each plain field.
"""
from __future__ import annotations

import codecs
import io
from collections.abc import Iterable
from dataclasses import dataclass, field

from python_multipart.exceptions import FormParserError
from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.datastructures import FormData, Headers, UploadFile

# A form's plain fields are names, transcripts and descriptions: a few KiB at most.
MAX_FIELD_BYTES = 64 * 1024
MAX_FIELDS = 32
MAX_FILES = 4


class FormRefused(ValueError):
    """A body that is not a form this server reads: no boundary, a part without a name, too
    many parts, a plain field too large, or not multipart at all. The message says which."""


@dataclass(slots=True)
class _Part:
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    name: str = ""
    filename: str | None = None
    data: bytearray = field(default_factory=bytearray)


class _FormCollector:
    """python-multipart's callbacks, collecting parts. Invariant: `items` holds each finished
    part in order (a plain field as text, a file as an UploadFile over its bytes), and at most
    `MAX_FIELDS` fields and `MAX_FILES` files were accepted."""

    def __init__(self, charset: str) -> None:
        self.charset = charset
        self.items: list[tuple[str, str | UploadFile]] = []
        self._part = _Part()
        self._header_name = bytearray()
        self._header_value = bytearray()
        self._fields = self._files = 0

    def callbacks(self) -> dict:
        return {"on_part_begin": self._begin, "on_part_data": self._data, "on_part_end": self._end,
                "on_header_field": self._header_field, "on_header_value": self._header_value_data,
                "on_header_end": self._header_end, "on_headers_finished": self._headers_finished}

    def _begin(self) -> None:
        self._part = _Part()

    def _header_field(self, data: bytes, start: int, end: int) -> None:
        self._header_name += data[start:end]

    def _header_value_data(self, data: bytes, start: int, end: int) -> None:
        self._header_value += data[start:end]

    def _header_end(self) -> None:
        self._part.headers.append((bytes(self._header_name).lower(), bytes(self._header_value)))
        self._header_name.clear()
        self._header_value.clear()

    def _headers_finished(self) -> None:
        disposition = dict(self._part.headers).get(b"content-disposition")
        _, options = parse_options_header(disposition)
        if b"name" not in options:
            raise FormRefused('a part of the form has no name (its Content-Disposition needs name="...")')
        self._part.name = self._text(options[b"name"])
        if b"filename" in options:
            self._files += 1
            self._part.filename = self._text(options[b"filename"])
        else:
            self._fields += 1
        if self._files > MAX_FILES or self._fields > MAX_FIELDS:
            raise FormRefused(f"the form has more than {MAX_FIELDS} fields or {MAX_FILES} files")

    def _data(self, data: bytes, start: int, end: int) -> None:
        part = self._part
        if part.filename is None and len(part.data) + end - start > MAX_FIELD_BYTES:
            raise FormRefused(f"the form field '{part.name}' is larger than {MAX_FIELD_BYTES} bytes")
        part.data += data[start:end]

    def _end(self) -> None:
        part = self._part
        if part.filename is None:
            self.items.append((part.name, self._text(part.data)))
            return
        upload = UploadFile(io.BytesIO(bytes(part.data)), size=len(part.data), filename=part.filename,
                            headers=Headers(raw=part.headers))
        self.items.append((part.name, upload))

    def _text(self, raw: bytes | bytearray) -> str:
        return bytes(raw).decode(self.charset, errors="replace")


def parse_multipart(content_type: str, body: Iterable[bytes]) -> FormData:
    """The form a multipart/form-data body holds, given as the pieces it arrived in (never
    joined: the parser reads each in turn); `content_type` is its header, with the boundary.
    Raises FormRefused."""
    media_type, params = parse_options_header(content_type)
    if media_type != b"multipart/form-data":
        raise FormRefused("the body must be multipart/form-data")
    boundary = params.get(b"boundary")
    if not boundary:
        raise FormRefused("the multipart/form-data body has no boundary in its Content-Type")
    collector = _FormCollector(_charset(params.get(b"charset")))
    parser = MultipartParser(boundary, collector.callbacks())
    try:
        for piece in body:
            parser.write(piece)
        parser.finalize()
    except FormParserError as exc:
        raise FormRefused(f"the multipart body is malformed: {exc}") from None
    return FormData(collector.items)


def _charset(declared: bytes | None) -> str:
    """The codec the form's text is in: the declared charset when Python knows it, else UTF-8."""
    try:
        return codecs.lookup(declared.decode("latin-1")).name if declared else "utf-8"
    except LookupError:
        return "utf-8"
