"""How much playable audio a response body has delivered, read as its bytes arrive.

An HTTP client sees a body as network reads of arbitrary size; each reader here turns one read
into the number of samples it made playable, so a trace records audio, not bytes: raw PCM
(Chorus `pcm`), a WAV file (Piper's answer, Chorus `wav`) and MP3 frames (Chorus `mp3`).
"""
from __future__ import annotations

import struct
from typing import Protocol

PCM16_BYTES = 2


class BodyAudio(Protocol):
    """A reader of one response body, fed every byte of it in order, once."""

    def samples_in(self, data: bytes) -> int:
        """Samples that became playable with `data`, the next bytes of the body."""


class PcmBody:
    """Headerless mono 16-bit PCM. Invariant: `_carry` holds the 0 or 1 bytes of a sample split
    across two reads, which count with the read that completes them."""

    def __init__(self) -> None:
        self._carry = 0

    def samples_in(self, data: bytes) -> int:
        whole, self._carry = divmod(self._carry + len(data), PCM16_BYTES)
        return whole


class WavBody:
    """A RIFF/WAVE file of mono 16-bit PCM at `sample_rate`: the chunks before `data` are no
    audio. Invariant: until the `data` chunk's header has arrived, `_header` holds every byte
    read so far; after it, the body is read as PCM."""

    def __init__(self, sample_rate: int) -> None:
        self.sample_rate = sample_rate
        self._header = b""
        self._pcm: PcmBody | None = None

    def samples_in(self, data: bytes) -> int:
        if self._pcm is not None:
            return self._pcm.samples_in(data)
        self._header += data
        if len(self._header) < 12:
            return 0
        if self._header[:4] != b"RIFF" or self._header[8:12] != b"WAVE":
            raise ValueError("the body is not a RIFF/WAVE file")
        offset = 12
        while offset + 8 <= len(self._header):
            chunk_id, size = self._header[offset:offset + 4], struct.unpack_from("<I", self._header, offset + 4)[0]
            if chunk_id == b"data":
                self._pcm = PcmBody()
                return self._pcm.samples_in(self._header[offset + 8:])
            if chunk_id == b"fmt " and offset + 16 <= len(self._header):
                channels, rate = struct.unpack_from("<HI", self._header, offset + 10)
                if (channels, rate) != (1, self.sample_rate):
                    raise ValueError(f"expected mono audio at {self.sample_rate} Hz, got {channels} "
                                     f"channels at {rate} Hz")
            offset += 8 + size + (size & 1)  # chunks are padded to an even size
        return 0


# MPEG audio Layer III: kbit/s by bitrate index, for MPEG-1 and for MPEG-2/2.5 (the version bits
# 3, and 2 or 0); sample rates by version bits and rate index.
_BITRATES_KBPS = {True: (0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320),
                  False: (0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160)}
_RATES = {3: (44100, 48000, 32000), 2: (22050, 24000, 16000), 0: (11025, 12000, 8000)}
_LAYER_III = 1


class Mp3Body:
    """A stream of MPEG Layer III frames (no ID3 tag, as Chorus streams it). A decoder plays a
    frame only once all of it has arrived, so a frame counts when its last byte does. Invariant:
    `_pending` starts at a frame header and holds less than that whole frame."""

    def __init__(self) -> None:
        self._pending = b""

    def samples_in(self, data: bytes) -> int:
        self._pending += data
        samples = 0
        while len(self._pending) >= 4:
            length, frame_samples = _frame_size(self._pending[:4])
            if len(self._pending) < length:
                break
            self._pending = self._pending[length:]
            samples += frame_samples
        return samples


def _frame_size(header: bytes) -> tuple[int, int]:
    """(bytes, samples) of the MPEG Layer III frame that starts with these 4 bytes."""
    b1, b2 = header[1], header[2]
    version, layer, bitrate_index, rate_index = (b1 >> 3) & 3, (b1 >> 1) & 3, b2 >> 4, (b2 >> 2) & 3
    if header[0] != 0xFF or b1 & 0xE0 != 0xE0 or version == 1 or layer != _LAYER_III \
            or bitrate_index in (0, 15) or rate_index == 3:
        raise ValueError(f"not an MPEG Layer III frame header: {header.hex()}")
    mpeg1 = version == 3
    samples = 1152 if mpeg1 else 576
    bitrate = _BITRATES_KBPS[mpeg1][bitrate_index] * 1000
    padding = (b2 >> 1) & 1
    return samples // 8 * bitrate // _RATES[version][rate_index] + padding, samples
