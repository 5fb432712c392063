"""Incremental encoders for the speech formats: float32 mono PCM in, the format's bytes out.

Every encoder returns whatever bytes it can after each `encode` call, so the first bytes leave
with the first audio chunk. What each codec holds back (its frame and look-ahead):
- pcm, wav: nothing.
- mp3 (LAME): one 576-sample granule plus the encoder delay (~50 ms at 24 kHz).
- aac (ADTS): one 1024-sample frame plus the encoder delay (another 1024 samples).
- opus (Ogg): one 20 ms frame; pages are cut every 20 ms instead of the muxer's default 1 s.
- flac: one 1024-sample block (the muxer default is 4608).
- mulaw, alaw (G.711, headerless, one byte a sample, 8 or 16 kHz: what telephony carries): nothing.
"""
from __future__ import annotations

import io
import struct
from abc import ABC, abstractmethod
from dataclasses import dataclass

import av
import numpy as np

from api.speech.audio.frames import to_frame

# A streamed WAV cannot know its length up front; these are the RIFF and data chunk sizes it
# carries, the largest values that fit, which decoders read as "until the end of the stream".
WAV_UNKNOWN_SIZE = 0xFFFFFFFF


def pcm16(samples: np.ndarray) -> bytes:
    """float32 in [-1, 1] → 16-bit signed little-endian (values outside are clipped)."""
    return np.round(np.clip(samples, -1.0, 1.0) * 32767.0).astype("<i2").tobytes()


class AudioEncoder(ABC):
    """Turns one stream of mono float32 PCM at `sample_rate` into a format's bytes. Invariant:
    the concatenation of every `encode` result and `finish` is one valid file of the format."""

    def __init__(self, sample_rate: int) -> None:
        self.sample_rate = sample_rate

    @abstractmethod
    def encode(self, pcm: np.ndarray) -> bytes: ...

    @abstractmethod
    def finish(self) -> bytes: ...


class RawPcmEncoder(AudioEncoder):
    """Headerless 16-bit signed little-endian mono."""

    def encode(self, pcm: np.ndarray) -> bytes:
        return pcm16(pcm)

    def finish(self) -> bytes:
        return b""


# WAVE format tags: the samples a WAV file's data chunk holds.
WAVE_PCM, WAVE_ALAW, WAVE_MULAW = 1, 6, 7


class StreamingWavEncoder(AudioEncoder):
    """A RIFF/WAVE header whose RIFF and data sizes hold WAV_UNKNOWN_SIZE, then the samples of
    `body` (PCM16 by default, 44 header bytes; G.711 with its format tag and an 18-byte fmt
    chunk, 46 header bytes, as non-PCM formats have)."""

    def __init__(self, sample_rate: int, body: AudioEncoder | None = None, format_tag: int = WAVE_PCM,
                 bits: int = 16) -> None:
        super().__init__(sample_rate)
        self._body = body or RawPcmEncoder(sample_rate)
        self._format_tag, self._bits = format_tag, bits
        self._header_sent = False

    def encode(self, pcm: np.ndarray) -> bytes:
        return self._with_header(self._body.encode(pcm))

    def finish(self) -> bytes:
        return self._with_header(self._body.finish())

    def _with_header(self, body: bytes) -> bytes:
        if self._header_sent:
            return body
        self._header_sent = True
        return self.header() + body

    def header(self) -> bytes:
        align = self._bits // 8
        fmt = struct.pack("<HHIIHH", self._format_tag, 1, self.sample_rate, self.sample_rate * align, align, self._bits)
        if self._format_tag != WAVE_PCM:
            fmt += struct.pack("<H", 0)  # cbSize: no extra format bytes
        return (
            b"RIFF" + struct.pack("<I", WAV_UNKNOWN_SIZE) + b"WAVE"
            + b"fmt " + struct.pack("<I", len(fmt)) + fmt
            + b"data" + struct.pack("<I", WAV_UNKNOWN_SIZE)
        )


class _ByteSink(io.RawIOBase):
    """The muxer's output: collects written bytes until the encoder hands them on."""

    def __init__(self) -> None:
        super().__init__()
        self._parts: list[bytes] = []

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        self._parts.append(bytes(data))
        return len(data)

    def take(self) -> bytes:
        data = b"".join(self._parts)
        self._parts.clear()
        return data


@dataclass(frozen=True, slots=True)
class ContainerSpec:
    """One FFmpeg muxer + encoder pairing and the options that make it stream."""

    container: str
    codec: str
    rates: tuple[int, ...] | None  # None: any rate
    codec_options: tuple[tuple[str, str], ...] = ()
    container_options: tuple[tuple[str, str], ...] = ()


class ContainerEncoder(AudioEncoder):
    """A PyAV muxer writing into memory; bytes are handed on after every packet is muxed."""

    def __init__(self, sample_rate: int, spec: ContainerSpec) -> None:
        super().__init__(sample_rate)
        self._sink = _ByteSink()
        # NOTE: flush_packets pushes each muxed packet through the I/O buffer at once; without
        # it the first bytes would wait for 32 KiB of output.
        options = {"flush_packets": "1", **dict(spec.container_options)}
        self._container = av.open(self._sink, "w", format=spec.container, options=options, buffer_size=4096)
        self._stream = self._container.add_stream(
            spec.codec, rate=sample_rate, layout="mono", options=dict(spec.codec_options)
        )
        self._pts = 0
        self._closed = False

    def encode(self, pcm: np.ndarray) -> bytes:
        if pcm.size:
            frame = to_frame(pcm, self.sample_rate, self._pts)
            self._pts += pcm.size
            self._container.mux(self._stream.encode(frame))
        return self._sink.take()

    def finish(self) -> bytes:
        if not self._closed:
            self._closed = True
            self._container.mux(self._stream.encode(None))
            self._container.close()
        return self._sink.take()


CONTAINER_SPECS: dict[str, ContainerSpec] = {
    "mp3": ContainerSpec(
        "mp3", "libmp3lame", (8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000),
        # A Xing/LAME info frame and an ID3 tag would need a seek back to fill in; a stream cannot.
        container_options=(("write_xing", "0"), ("id3v2_version", "0")),
    ),
    "opus": ContainerSpec(
        "ogg", "libopus", (8000, 12000, 16000, 24000, 48000),
        container_options=(("page_duration", "20000"),),
    ),
    "aac": ContainerSpec("adts", "aac", (8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000)),
    "flac": ContainerSpec(
        "flac", "flac", None,
        codec_options=(("frame_size", "1024"),),
        container_options=(("metadata_header_padding", "0"),),
    ),
    # G.711 is defined at 8 kHz; wideband telephony gear also takes it at 16 kHz.
    "mulaw": ContainerSpec("mulaw", "pcm_mulaw", (8000, 16000)),
    "alaw": ContainerSpec("alaw", "pcm_alaw", (8000, 16000)),
}
# A format whose rates exclude the server's default sample rate says what it defaults to.
DEFAULT_RATES = {"mulaw": 8000, "alaw": 8000}

MEDIA_TYPES = {
    "mp3": "audio/mpeg",
    "opus": "audio/ogg; codecs=opus",
    "aac": "audio/aac",
    "flac": "audio/flac",
    "wav": "audio/wav",
    "pcm": "audio/pcm",
    # RFC 3551's names for G.711 (RFC 4856 registers them; rate and channels are in the request).
    "mulaw": "audio/PCMU",
    "alaw": "audio/PCMA",
}

RESPONSE_FORMATS = tuple(MEDIA_TYPES)


def default_rate(response_format: str, server_default: int) -> int:
    """The sample rate a response of `response_format` has when the request names none."""
    return DEFAULT_RATES.get(response_format, server_default)


def supported_rates(response_format: str) -> tuple[int, ...] | None:
    """The sample rates a format can carry (None: any)."""
    spec = CONTAINER_SPECS.get(response_format)
    return spec.rates if spec else None


# G.711 in a WAV file, as Deepgram's speak API sends mulaw and alaw by default (not a
# response_format of the OpenAI route: api/deepgram/formats.py asks for them).
WAV_G711 = {"wav-mulaw": ("mulaw", WAVE_MULAW), "wav-alaw": ("alaw", WAVE_ALAW)}


def make_encoder(response_format: str, sample_rate: int) -> AudioEncoder:
    if response_format == "pcm":
        return RawPcmEncoder(sample_rate)
    if response_format == "wav":
        return StreamingWavEncoder(sample_rate)
    if response_format in WAV_G711:
        law, tag = WAV_G711[response_format]
        return StreamingWavEncoder(sample_rate, make_encoder(law, sample_rate), tag, bits=8)
    spec = CONTAINER_SPECS.get(response_format)
    if spec is None:
        raise ValueError(f"unknown response format {response_format!r}")
    if spec.rates is not None and sample_rate not in spec.rates:
        raise ValueError(f"{response_format} cannot carry {sample_rate} Hz; supported: {spec.rates}")
    return ContainerEncoder(sample_rate, spec)
