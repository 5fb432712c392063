"""Deepgram's audio query parameters (`encoding`, `container`, `sample_rate`) → the format and
rate of Chorus's audio pipeline, with Deepgram's defaults."""
from __future__ import annotations

from dataclasses import dataclass

from api.speech.audio.encoders import MEDIA_TYPES
from api.http.quoting import quoted


class InvalidAudioQuery(ValueError):
    """An encoding, container or sample rate Deepgram's API (or this server) does not offer."""

    def __init__(self, param: str, message: str) -> None:
        super().__init__(message)
        self.param = param


@dataclass(frozen=True, slots=True)
class Encoding:
    """One Deepgram encoding: its containers (the first is the default), its sample rates (the
    first is the default), and the response format each container maps to."""

    containers: dict[str, str]
    rates: tuple[int, ...]


_LINEAR_RATES = (24000, 8000, 16000, 32000, 48000)
_G711_RATES = (8000, 16000)
# What Deepgram documents for each encoding (mp3 and aac at a fixed 22050 Hz, opus at 48 kHz).
REST_ENCODINGS = {
    "linear16": Encoding({"wav": "wav", "none": "pcm"}, _LINEAR_RATES),
    "mulaw": Encoding({"wav": "wav-mulaw", "none": "mulaw"}, _G711_RATES),
    "alaw": Encoding({"wav": "wav-alaw", "none": "alaw"}, _G711_RATES),
    "mp3": Encoding({"none": "mp3"}, (22050,)),
    "opus": Encoding({"ogg": "opus"}, (48000,)),
    "flac": Encoding({"none": "flac"}, (48000, 8000, 16000, 22050, 32000)),
    "aac": Encoding({"none": "aac"}, (22050,)),
}
# The WebSocket sends raw samples only.
SOCKET_ENCODINGS = {name: Encoding({"none": REST_ENCODINGS[name].containers["none"]}, REST_ENCODINGS[name].rates)
                    for name in ("linear16", "mulaw", "alaw")}
DEFAULT_REST_ENCODING = "mp3"
DEFAULT_SOCKET_ENCODING = "linear16"
_MEDIA_TYPES = {**MEDIA_TYPES, "wav-mulaw": "audio/wav", "wav-alaw": "audio/wav"}
_RAW_SAMPLE_BYTES = {"pcm": 2, "mulaw": 1, "alaw": 1}


@dataclass(frozen=True, slots=True)
class AudioChoice:
    """What a request asked for: Chorus's response format for the pipeline, its sample rate, and
    the media type of the bytes."""

    response_format: str
    sample_rate: int

    @property
    def media_type(self) -> str:
        return _MEDIA_TYPES[self.response_format]

    @property
    def sample_bytes(self) -> int | None:
        """Bytes per sample of a raw (headerless, uncompressed) format; None for the others."""
        return _RAW_SAMPLE_BYTES.get(self.response_format)


def audio_choice(encodings: dict[str, Encoding], encoding: str | None, container: str | None,
                 sample_rate: str | None, default_encoding: str) -> AudioChoice:
    """The format a request's query parameters ask for (None: Deepgram's default)."""
    name = encoding or default_encoding
    if name not in encodings:
        raise InvalidAudioQuery("encoding", f"encoding must be one of {', '.join(encodings)}; got {quoted(name)}")
    spec = encodings[name]
    box = container or next(iter(spec.containers))
    if box not in spec.containers:
        raise InvalidAudioQuery("container", f"{name} audio comes in container {' or '.join(spec.containers)}; "
                                             f"got {quoted(box)}")
    if sample_rate is None:
        rate = spec.rates[0]
    else:
        try:
            rate = int(sample_rate)
        except ValueError:
            raise InvalidAudioQuery("sample_rate", f"sample_rate must be an integer; got {quoted(sample_rate)}") from None
        if rate not in spec.rates:
            raise InvalidAudioQuery("sample_rate", f"{name} takes sample_rate {', '.join(map(str, sorted(spec.rates)))}; "
                                                   f"got {rate}")
    return AudioChoice(spec.containers[box], rate)
