"""An uploaded voice clip → clean mono samples for the model's encoders: decode whatever PyAV
reads, mix to mono, resample, cut leading and trailing silence, check the length.

The server runs this module only in a decoder process (api/voices/clip_worker.py): FFmpeg and
PyAV read the uploader's bytes, and a crash there must cost that upload alone.

Vocabulary: *decoded seconds* are the upload's length as its decoder produces it, before any
trimming; *speech* is what is left once leading and trailing silence are cut (interior pauses
stay). Every refusal is a ClipRejected, whose `reason` says which rule the upload broke.
"""
from __future__ import annotations

import io
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

import av
import numpy as np

# Below this level a frame is silence whatever the rest of the clip holds: it is under the noise
# floor of ordinary microphones, so nothing there is speech an encoder can use, and digital
# silence is silence even in a clip whose loudest frame is barely above it.
SILENCE_FLOOR_DB = -60.0
# The highest rate audio is recorded at (768 kHz); a header claiming more is damaged, and
# resampling from hundreds of MHz takes FFmpeg seconds per frame.
MAX_SOURCE_RATE = 768_000
# The decoded length prepare_clip allows, as a multiple of its speech limit: room for pauses and
# padding, but no more (30 s of speech → 120 s decoded).
DECODED_PER_SPEECH = 4.0
# 7.1 is the most channels a recording of one speaker plausibly has; more are refused from the
# container's metadata, before anything is decoded.
MAX_CHANNELS = 8
# Why an upload was refused; "decoder_failed": its decoder process failed (api/voices/clip_decoder.py).
REFUSALS = frozenset({"empty", "not_audio", "corrupt", "too_many_channels", "too_long_decoded", "silent",
                      "too_short", "too_long", "decoder_failed"})


class ClipRejected(ValueError):
    """An upload that cannot become a voice. Invariant: `reason` is one of REFUSALS, and the
    message says what was wrong in words the uploader can act on (the route answers 400 naming
    the `audio` field)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Clip:
    """A clip ready for the encoders. Invariant: `samples` is read-only 1-D float32 mono in
    [-1, 1] at `sample_rate`, leading and trailing silence cut, and `seconds` lies within the
    bounds prepare_clip was given; `original_seconds` is the decoded length before trimming."""

    samples: np.ndarray
    sample_rate: int
    original_seconds: float

    @property
    def seconds(self) -> float:
        return self.samples.size / self.sample_rate


def prepare_clip(data: bytes, sample_rate: int, *, min_seconds: float = 1.0, max_seconds: float = 30.0) -> Clip:
    """An upload's bytes → a Clip of `min_seconds` to `max_seconds` of speech at `sample_rate`."""
    decoded = decode_clip(data, sample_rate, max_seconds_decoded=DECODED_PER_SPEECH * max_seconds)
    speech = trim_silence(decoded, sample_rate)
    seconds = speech.size / sample_rate
    if not min_seconds <= seconds <= max_seconds:
        raise ClipRejected(
            "too_short" if seconds < min_seconds else "too_long",
            f"the clip is {seconds:.2f} s of speech after trimming silence; "
            f"a voice needs {min_seconds:g}-{max_seconds:g} s",
        )
    speech.setflags(write=False)
    return Clip(speech, sample_rate, original_seconds=decoded.size / sample_rate)


def decode_clip(data: bytes, sample_rate: int, *, max_seconds_decoded: float = 120.0) -> np.ndarray:
    """Any container and codec FFmpeg reads, from memory → float32 mono in [-1, 1] at
    `sample_rate`. Refuses once more than `max_seconds_decoded` have been decoded: a small file
    can decode to hours (a compressed stretch of silence), so the cap is on what decoding
    produces, checked frame by frame, never on the upload's size; a file whose metadata already
    says so is refused before decoding, as is one with too many channels or an impossible rate."""
    if not data:
        raise ClipRejected("empty", "the audio file is empty")
    with _refusing("not_audio", "the file is not audio FFmpeg can read"):
        # NOTE: no protocol is allowed: the upload is read from memory, and an ffconcat or
        # playlist text would otherwise make FFmpeg open files on this server. Tags in another
        # encoding than UTF-8 are no reason to refuse the audio.
        container = av.open(io.BytesIO(data), metadata_errors="replace",
                            container_options={"protocol_whitelist": "none"})
    with container:
        if not container.streams.audio:
            raise ClipRejected("not_audio", "the audio could not be decoded: the file holds no audio stream")
        stream = container.streams.audio[0]
        _check_metadata(container, stream, max_seconds_decoded)
        with _refusing("corrupt", "the file is damaged"):
            pieces = list(_mono_pieces(container, stream, sample_rate, max_seconds_decoded))
    samples = np.concatenate(pieces) if pieces else np.zeros(0, np.float32)
    if samples.size == 0:
        raise ClipRejected("corrupt", "the audio could not be decoded: the file holds no audio samples "
                                      "(is it truncated?)")
    if not np.isfinite(samples).all():
        raise ClipRejected("corrupt", "the audio could not be decoded: it holds NaN or infinite samples")
    # Float formats may exceed full scale, and lossy decoders overshoot it slightly.
    return np.clip(samples, -1.0, 1.0)


def _check_metadata(container: av.container.InputContainer, stream: av.AudioStream, max_seconds_decoded: float) -> None:
    """What the container says of its first audio stream, checked before any of it is decoded.
    A count, rate or duration it leaves unknown (0, None) is checked on each frame instead."""
    if stream.codec_context is None:
        raise ClipRejected("corrupt", "the audio could not be decoded: its stream names no codec FFmpeg has")
    _check_channels(stream.codec_context.channels, "the audio has")
    if stream.codec_context.sample_rate:
        _check_rate(stream.codec_context.sample_rate)
    if stream.duration is not None and stream.time_base is not None:
        seconds = float(stream.duration * stream.time_base)
    elif container.duration is not None:
        seconds = container.duration / av.time_base
    else:
        return
    if seconds > max_seconds_decoded:
        raise ClipRejected("too_long_decoded", f"the file says its audio runs {seconds:.0f} s, longer than the "
                                               f"{max_seconds_decoded:g} s a clip may run; upload a shorter clip")


def _check_channels(channels: int, what: str) -> None:
    if channels > MAX_CHANNELS:
        raise ClipRejected("too_many_channels", f"{what} {channels} channels; a voice's clip may have at most "
                                                f"{MAX_CHANNELS} (7.1): upload a mono or stereo recording")


def _check_rate(rate: int) -> None:
    if not 0 < rate <= MAX_SOURCE_RATE:
        raise ClipRejected("corrupt", f"the audio could not be decoded: its sample rate ({rate} Hz) is not one "
                                      "audio is recorded at")


def _mono_pieces(container: av.container.InputContainer, stream: av.AudioStream, sample_rate: int,
                 max_seconds_decoded: float) -> Iterator[np.ndarray]:
    """`stream` decoded, resampled (the resampler flushed at the end) and mixed to mono, piece
    by piece."""
    # The layout is kept: channels are mixed here by their mean, because FFmpeg's downmix to
    # float mono adds channels at -3 dB (identical stereo channels come out 1.41x louder, 5.1
    # past full scale); the mean leaves a level unchanged and never exceeds full scale.
    # NOTE: packed (interleaved) floats, one plane whatever the channels: PyAV's to_ndarray
    # crashes the process on a planar frame of 8 or more planes.
    resampler = av.AudioResampler(format="flt", rate=sample_rate)
    decoded_seconds = 0.0
    for frame in container.decode(stream):
        _check_channels(frame.layout.nb_channels, "a frame of the audio has")
        _check_rate(frame.sample_rate)
        decoded_seconds += frame.samples / frame.sample_rate
        if decoded_seconds > max_seconds_decoded:
            raise ClipRejected("too_long_decoded", f"the audio runs longer than {max_seconds_decoded:g} s "
                                                   "when decoded; upload a shorter clip")
        yield from _mean_of_channels(resampler.resample(frame))
    yield from _mean_of_channels(resampler.resample(None))


def _mean_of_channels(frames: list[av.AudioFrame]) -> Iterator[np.ndarray]:
    """Packed frames → the mean of their channels, from each frame's (samples, channels) view."""
    for frame in frames:
        interleaved = frame.to_ndarray().reshape(frame.samples, frame.layout.nb_channels)
        yield interleaved.mean(axis=1, dtype=np.float32)


@contextmanager
def _refusing(reason: str, what: str) -> Iterator[None]:
    """Turns PyAV's errors (and the resampler's ValueError when a stream changes format midway)
    into a ClipRejected with `reason`; a ClipRejected or MemoryError raised inside passes unchanged."""
    try:
        yield
    except (ClipRejected, MemoryError):
        raise  # NOTE: av.error.MemoryError is an FFmpegError too: running out is no fault of the file
    except (av.error.FFmpegError, ValueError) as error:
        detail = error.strerror if isinstance(error, av.error.FFmpegError) else str(error)
        raise ClipRejected(reason, f"the audio could not be decoded: {what} ({detail})") from error


def trim_silence(samples: np.ndarray, sample_rate: int, *, threshold_db: float = -40.0,
                 frame_seconds: float = 0.02, keep_seconds: float = 0.1) -> np.ndarray:
    """Cuts leading and trailing silence, keeping `keep_seconds` of margin each side; pauses
    inside stay. A frame of `frame_seconds` is silence when its RMS level is below `threshold_db`
    relative to the loudest frame's, or below SILENCE_FLOOR_DB. Refuses a clip all silence."""
    frame, keep = max(1, round(frame_seconds * sample_rate)), round(keep_seconds * sample_rate)
    levels = _frame_levels_db(samples, frame)
    speech = np.flatnonzero(levels >= max(levels.max(initial=-np.inf) + threshold_db, SILENCE_FLOOR_DB))
    if speech.size == 0:
        raise ClipRejected("silent", f"the clip is silent: no part of it is louder than {SILENCE_FLOOR_DB:g} dBFS")
    start = max(0, speech[0] * frame - keep)
    end = min(samples.size, (speech[-1] + 1) * frame + keep)
    return samples[start:end]


def _frame_levels_db(samples: np.ndarray, frame: int) -> np.ndarray:
    """The RMS level in dBFS of each `frame` samples (the last frame may be shorter)."""
    starts = np.arange(0, samples.size, frame)
    energy = np.add.reduceat(np.square(samples, dtype=np.float64), starts)
    rms = np.sqrt(energy / np.diff(starts, append=samples.size))
    return 20.0 * np.log10(np.maximum(rms, 1e-10))
