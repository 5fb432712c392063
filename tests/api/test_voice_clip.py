"""Voice clips (api/voices/clip.py) against files PyAV encodes here: every format decodes to mono
at the asked rate, silence is cut at the edges only, up to 8 channels mix to their mean and more
are refused from the metadata, and every bad upload is a ClipRejected with its reason. The
decoding runs in this process here; the server runs it in a decoder process
(tests/api/live/test_clip_decoder.py)."""
from __future__ import annotations

import io
import struct
import time
import tracemalloc
import zlib
from functools import cache

import av
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api.voices.clip import MAX_CHANNELS, ClipRejected, decode_clip, prepare_clip, trim_silence
from benchmarks.hostile_media import channels_of, encoded, wav_of
from tests.api.voice_clips import EIGHT_CHANNEL_FORMATS, MANY_CHANNEL_FORMATS
SOURCE_RATE = 48000  # the files' rate
RATE = 24000  # the rate asked of the clip code
# The utterance: 0.5 s silence, 1 s voiced, a 0.4 s pause, 1 s voiced, 0.5 s silence.
LEAD, VOICED, PAUSE = 0.5, 1.0, 0.4
TOTAL = 2 * LEAD + 2 * VOICED + PAUSE  # 3.4 s
SPEECH = 2 * VOICED + PAUSE + 2 * 0.1  # 2.6 s: trimmed, with the 0.1 s margins
# Measured: WAV, FLAC, MP3 (LAME's gapless header), Opus and Vorbis decode to the exact length;
# AAC pads its end to whole 1024-sample frames (+13.3 ms for this utterance), so it may run up to
# one frame long. Trimming cuts that padding with the silence.
AAC_PADDING = 1024 / SOURCE_RATE


def has_encoder(codec: str) -> bool:
    """Whether this PyAV build can encode `codec` (av.codecs_available mixes in decoders)."""
    try:
        av.Codec(codec, "w")
    except av.codec.codec.UnknownCodecError:
        return False
    return True


# name: (container, codec, codec options, how much longer than the source it may decode)
FORMATS = {
    "wav-s16": ("wav", "pcm_s16le", {}, 0.0),
    "wav-s24": ("wav", "pcm_s24le", {}, 0.0),
    "wav-f32": ("wav", "pcm_f32le", {}, 0.0),
    "flac": ("flac", "flac", {}, 0.0),
    "mp3": ("mp3", "libmp3lame", {}, 0.0),
    "ogg-opus": ("ogg", "libopus", {}, 0.0),
    "webm-opus": ("webm", "libopus", {}, 0.0),  # what browsers' MediaRecorder produces
    "ogg-vorbis": ("ogg", "vorbis", {"strict": "experimental"}, 0.0),  # FFmpeg's own encoder
    "m4a-aac": ("ipod", "aac", {}, AAC_PADDING),
}


def voiced(seconds: float, rate: int = SOURCE_RATE, f0: float = 150.0) -> np.ndarray:
    """A vowel-like sound: ten harmonics of `f0` under a 3 Hz swell, with 10 ms fades."""
    t = np.arange(round(seconds * rate)) / rate
    harmonics = sum(np.sin(2 * np.pi * f0 * k * t) / k for k in range(1, 11))
    fades = np.minimum(1.0, np.minimum(t, seconds - t) / 0.01)
    x = harmonics * (0.6 + 0.4 * np.sin(2 * np.pi * 3 * t)) * fades
    return (0.5 * x / np.abs(x).max()).astype(np.float32)


def silence(seconds: float, rate: int = SOURCE_RATE) -> np.ndarray:
    return np.zeros(round(seconds * rate), np.float32)


def utterance(rate: int = SOURCE_RATE) -> np.ndarray:
    return np.concatenate([silence(LEAD, rate), voiced(VOICED, rate), silence(PAUSE, rate),
                           voiced(VOICED, rate), silence(LEAD, rate)])


def encode(container: str, codec: str, channels: np.ndarray, rate: int = SOURCE_RATE,
           options: dict | None = None, block: int | None = None) -> bytes:
    """(channels, samples) float32 → one file; `block` feeds it in frames of that many samples."""
    channels = np.atleast_2d(channels)
    block = block or channels.shape[1]
    buffer = io.BytesIO()
    with av.open(buffer, "w", format=container) as out:
        stream = out.add_stream(codec, rate=rate, layout="stereo" if len(channels) == 2 else "mono",
                                options=options or {})
        for start in range(0, channels.shape[1], block):
            frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(channels[:, start:start + block]),
                                               format="fltp", layout=stream.layout.name)
            frame.sample_rate, frame.pts = rate, start
            out.mux(stream.encode(frame))
        out.mux(stream.encode(None))
    return buffer.getvalue()


def wav(samples: np.ndarray, rate: int = SOURCE_RATE, codec: str = "pcm_s16le") -> bytes:
    return encode("wav", codec, samples, rate)


def rms(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(x, dtype=np.float64))))


@cache
def stereo_file(name: str) -> bytes:
    """The utterance in both channels, the right at half the left's level."""
    container, codec, options, _ = FORMATS[name]
    x = utterance()
    return encode(container, codec, np.stack([x, 0.5 * x]), options=options)


@pytest.mark.parametrize("name", [
    pytest.param(name, marks=pytest.mark.skipif(not has_encoder(codec), reason=f"this PyAV has no {codec} encoder"))
    for name, (_, codec, _, _) in FORMATS.items()
])
def test_each_format_decodes_to_mono_at_the_asked_rate_and_trims(name):
    samples = decode_clip(stereo_file(name), RATE)
    assert samples.dtype == np.float32 and samples.ndim == 1
    assert np.abs(samples).max() <= 1.0
    padding = FORMATS[name][3]
    assert TOTAL - 1 / RATE <= samples.size / RATE <= TOTAL + padding + 1 / RATE
    # The mean of the channels (0.75 of the left), not FFmpeg's -3 dB sum (1.06 of it).
    assert rms(samples) == pytest.approx(0.75 * rms(utterance()), rel=0.05)
    clip = prepare_clip(stereo_file(name), RATE)
    assert clip.sample_rate == RATE and clip.samples.dtype == np.float32
    assert clip.seconds == pytest.approx(SPEECH, abs=0.02)  # one 20 ms trimming frame
    assert clip.original_seconds == samples.size / RATE
    assert not clip.samples.flags.writeable


def test_stereo_channels_mix_to_their_mean():
    left, right = voiced(1.0), 0.3 * np.sin(2 * np.pi * 440 * np.arange(SOURCE_RATE) / SOURCE_RATE)
    data = wav(np.stack([left, right]).astype(np.float32), codec="pcm_f32le")
    np.testing.assert_allclose(decode_clip(data, SOURCE_RATE), (left + right) / 2, atol=1e-6)


def test_trim_cuts_the_padding_keeps_the_margins_and_the_pause():
    x = utterance(RATE)
    trimmed = trim_silence(x, RATE)
    # 0.5 s of padding and 20 ms frames: speech starts on a frame boundary, 0.1 s margins kept.
    np.testing.assert_array_equal(trimmed, x[round((LEAD - 0.1) * RATE):round((TOTAL - LEAD + 0.1) * RATE)])
    assert trimmed.size / RATE == pytest.approx(SPEECH)


def test_quiet_real_speech_is_kept():
    x = utterance(RATE)
    quiet = x * (10 ** (-30 / 20) / rms(voiced(VOICED, RATE)))  # speech at -30 dBFS RMS
    assert trim_silence(quiet, RATE).size == trim_silence(x, RATE).size


def test_noise_far_under_the_speech_is_cut_as_silence():
    noise = np.random.default_rng(0).normal(0, 10 ** (-55 / 20), round(TOTAL * RATE)).astype(np.float32)
    x = utterance(RATE)
    # -55 dBFS is over the absolute floor but 40+ dB under the loudest frame.
    assert trim_silence(x + noise, RATE).size / RATE == pytest.approx(SPEECH, abs=0.02)


@pytest.mark.parametrize("samples", [silence(3.0), np.full(SOURCE_RATE * 3, 1e-4, np.float32)],
                         ids=["digital", "-80dBFS"])
def test_silence_is_refused(samples):
    with pytest.raises(ClipRejected) as refused:
        prepare_clip(wav(samples, codec="pcm_f32le"), RATE)
    assert refused.value.reason == "silent"


def test_half_a_second_of_speech_is_too_short():
    data = wav(np.concatenate([silence(1.0), voiced(0.5), silence(1.0)]))
    with pytest.raises(ClipRejected) as refused:
        prepare_clip(data, RATE)
    assert refused.value.reason == "too_short"
    assert "0.70 s of speech" in str(refused.value) and "1-30 s" in str(refused.value)  # 0.5 + margins


def test_thirty_one_seconds_of_speech_is_too_long():
    with pytest.raises(ClipRejected) as refused:
        prepare_clip(wav(voiced(31.0, RATE), RATE), RATE)
    assert refused.value.reason == "too_long" and "31.00 s" in str(refused.value)


def flac_bomb() -> bytes:
    """30 min of FLAC silence at 8 kHz in 4 s blocks: ~14 KB that decode to 14.4 M samples
    (115 MB of float32 at 16 kHz)."""
    bomb = encode("flac", "flac", silence(1800.0, 8000), 8000, options={"frame_size": "32768"}, block=32768)
    assert len(bomb) < 32_000
    return bomb


def test_a_file_that_says_it_runs_too_long_is_refused_before_decoding():
    with pytest.raises(ClipRejected) as refused:
        decode_clip(flac_bomb(), 16000)
    assert refused.value.reason == "too_long_decoded"
    assert str(refused.value).startswith("the file says its audio runs 1800 s") and "120 s" in str(refused.value)


def test_a_decompression_bomb_stops_early():
    # The bomb with its length unsaid (STREAMINFO's total samples 0, "unknown"): decoding stops
    # once past the 120 s cap.
    bomb = bytearray(flac_bomb())
    assert bomb[:4] == b"fLaC" and bomb[4] & 0x7F == 0  # STREAMINFO first; its body from byte 8
    bomb[21] &= 0xF0  # the 36-bit total: the low half of byte 21 and bytes 22-25
    bomb[22:26] = bytes(4)
    bomb = bytes(bomb)
    tracemalloc.start()
    started = time.perf_counter()
    try:
        with pytest.raises(ClipRejected) as refused:
            decode_clip(bomb, 16000)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert refused.value.reason == "too_long_decoded" and "120 s when decoded" in str(refused.value)
    assert peak < 10_000_000  # at most the 120 s decoded (7.7 MB), never the whole 115 MB
    assert time.perf_counter() - started < 2.0


@pytest.mark.parametrize("name", ["wav-s16", "wav-f32", "wavext-s16", "wavext-f32", *EIGHT_CHANNEL_FORMATS])
def test_eight_channels_mix_to_their_mean(name):
    """7.1 from every container that carries it in FFmpeg's own order: decoded as packed floats
    (PyAV crashed the process converting 8 planes), mixed to the mean of the channels."""
    channels = channels_of(MAX_CHANNELS, 2.0, SOURCE_RATE)
    if name.startswith("wav"):
        data = wav_of(channels, SOURCE_RATE, extensible=name.startswith("wavext"), float32=name.endswith("f32"))
    else:
        container, codec, options = EIGHT_CHANNEL_FORMATS[name]
        data = encoded(container, codec, channels, SOURCE_RATE, options)
    samples = decode_clip(data, SOURCE_RATE)
    assert samples.size == channels.shape[1]
    if name == "ogg-opus":  # lossy: the level, not the waveform
        assert rms(samples) == pytest.approx(rms(channels.mean(axis=0)), rel=0.02)
    else:  # 16-bit samples are within half a step of what was written
        np.testing.assert_allclose(samples, channels.mean(axis=0), atol=1e-6 if name.endswith("f32") else 4e-5)
    assert prepare_clip(data, RATE).seconds == pytest.approx(2.0, abs=0.02)


def many_channels(name: str, count: int) -> bytes:
    """A quarter of a second of `count` channels (8 kHz; Opus takes 48 kHz only)."""
    if name.startswith("wav"):
        return wav_of(channels_of(count, 0.25, 8000), 8000, extensible=name == "wavext")
    container, codec, options = MANY_CHANNEL_FORMATS[name]
    rate = 48000 if codec == "libopus" else 8000
    return encoded(container, codec, channels_of(count, 0.25, rate), rate, options)


@pytest.mark.parametrize("name, count", [
    ("wav", 9), ("wav", 12), ("wav", 255), ("wav", 256), ("wav", 512), ("wavext", 12), ("wavext", 255),
    ("mka-pcm", 12), ("mka-pcm", 255), ("caf-pcm", 12), ("caf-pcm", 255), ("aiff-pcm", 12), ("aiff-pcm", 255),
    ("ogg-opus", 12), ("ogg-opus", 254),  # libopus encodes at most 254 channels, FLAC 8, FFmpeg's Vorbis 2
])
def test_more_than_eight_channels_are_refused_from_the_metadata(name, count):
    data = many_channels(name, count)
    started = time.perf_counter()
    with pytest.raises(ClipRejected) as refused:
        decode_clip(data, RATE)
    assert refused.value.reason == "too_many_channels"
    # The container's word, not a decoded frame's ("a frame of the audio has ...").
    assert str(refused.value).startswith(f"the audio has {count} channels") and "at most 8" in str(refused.value)
    assert time.perf_counter() - started < 0.5


@pytest.mark.parametrize("count", [513, 1024])
def test_a_wav_of_more_channels_than_ffmpeg_reads_is_refused(count):
    """FFmpeg opens no decoder for more than 512 channels. The FFmpeg of PyAV 18.1.0 leaves the
    count unknown (0), and decoding fails: corrupt; that of 18.1.1 reports it: too many channels,
    from the metadata. Refused either way, and never decoded."""
    with pytest.raises(ClipRejected) as refused:
        decode_clip(wav_of(channels_of(count, 0.25, 8000), 8000), RATE)
    assert refused.value.reason in ("corrupt", "too_many_channels")


def png() -> bytes:
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
    ihdr = struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0)  # 1x1 grey
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0\0")) + chunk(b"IEND", b"")


def wav_header() -> bytes:
    """A WAV truncated after its header (PyAV writes a LIST chunk before the data chunk)."""
    data = wav(voiced(1.0))
    return data[:data.index(b"data") + 8]


def nan_wav() -> bytes:
    x = voiced(2.0)
    x[SOURCE_RATE // 2] = np.nan
    return wav(x, codec="pcm_f32le")


def out_of_rate_wav() -> bytes:
    data = bytearray(wav(voiced(0.5)))
    data[24:28] = struct.pack("<I", 771_406_720)  # the fmt chunk's sample rate
    return bytes(data)


@pytest.mark.parametrize("data, reason", [
    (b"", "empty"),
    (png(), "not_audio"),
    (b"this is a voice, honestly\n" * 40, "not_audio"),
    (np.random.default_rng(0).bytes(4096), "not_audio"),
    (wav_header(), "corrupt"),
    (nan_wav(), "corrupt"),
    (out_of_rate_wav(), "corrupt"),  # resampling from 771 MHz would take FFmpeg seconds
], ids=["empty", "png", "text", "random", "wav-header", "nan", "771MHz"])
def test_bad_uploads_are_refused(data, reason):
    started = time.perf_counter()
    with pytest.raises(ClipRejected) as refused:
        decode_clip(data, RATE)
    assert refused.value.reason == reason
    assert time.perf_counter() - started < 1.0


def test_a_video_without_audio_is_not_audio():
    buffer = io.BytesIO()
    with av.open(buffer, "w", format="matroska") as out:
        stream = out.add_stream("ffv1", rate=1)
        stream.width = stream.height = 16
        out.mux(stream.encode(av.VideoFrame.from_ndarray(np.zeros((16, 16, 3), np.uint8), format="rgb24")))
        out.mux(stream.encode(None))
    with pytest.raises(ClipRejected, match="no audio stream") as refused:
        decode_clip(buffer.getvalue(), RATE)
    assert refused.value.reason == "not_audio"


def test_a_playlist_cannot_open_files_on_the_server(tmp_path, monkeypatch):
    (tmp_path / "secret.wav").write_bytes(wav(voiced(2.0)))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ClipRejected) as refused:
        decode_clip(b"ffconcat version 1.0\nfile 'secret.wav'\n", RATE)
    assert refused.value.reason == "not_audio"


def test_float_samples_past_full_scale_are_clipped():
    samples = decode_clip(wav(2.0 * voiced(1.0), codec="pcm_f32le"), SOURCE_RATE)
    assert np.abs(samples).max() == 1.0


@cache
def small_files() -> tuple[bytes, ...]:
    x = voiced(0.3, 16000)
    return tuple(encode(container, codec, x, 16000, options)
                 for container, codec, options in [("wav", "pcm_s16le", {}), ("flac", "flac", {}),
                                                   ("ogg", "libopus", {}), ("mp3", "libmp3lame", {})]
                 if has_encoder(codec))


def damaged(index: int, edits: list[tuple[int, int]], cut: int) -> bytes:
    data = bytearray(small_files()[index % len(small_files())])
    for position, value in edits:
        data[position % len(data)] = value
    return bytes(data[:len(data) - cut])


uploads = st.one_of(
    st.binary(max_size=4096),
    st.builds(damaged, st.integers(0, 3), st.lists(st.tuples(st.integers(0, 2**16), st.integers(0, 255)), max_size=8),
              st.integers(0, 2000)),
)


# A generous deadline: every upload here is a few KB, decoded in milliseconds on a 2-core machine.
@settings(max_examples=200, deadline=2000)
@given(uploads)
def test_arbitrary_bytes_decode_or_are_refused(data):
    try:
        samples = decode_clip(data, RATE)
    except ClipRejected as refused:
        assert refused.reason in {"empty", "not_audio", "corrupt", "too_many_channels", "too_long_decoded"}
        return
    assert samples.dtype == np.float32 and samples.ndim == 1 and samples.size > 0
    assert np.isfinite(samples).all() and np.abs(samples).max() <= 1.0
