"""The API's audio stages against independent references (PyAV decoding, numpy, FFT)."""
from __future__ import annotations

import asyncio
import struct
import threading

import av
import numpy as np
import pytest

from api.speech.audio.encoders import WAV_UNKNOWN_SIZE, make_encoder, pcm16
from api.speech.audio.pipeline import INLINE_SAMPLES, AudioPipeline
from api.speech.audio.resample import StreamingResampler
from api.speech.audio.tempo import TempoStretcher, atempo_factors
from tests.api.audio_check import decode

RATE = 24000


def tone(freq: float, seconds: float, rate: int = RATE) -> np.ndarray:
    return (0.5 * np.sin(2 * np.pi * freq * np.arange(int(seconds * rate)) / rate)).astype(np.float32)


def in_pieces(x: np.ndarray, size: int = 2048) -> list[np.ndarray]:
    return [x[i:i + size] for i in range(0, x.size, size)]


def dominant_frequency(x: np.ndarray, rate: int) -> float:
    spectrum = np.abs(np.fft.rfft(x * np.hanning(x.size)))
    return float(np.fft.rfftfreq(x.size, 1 / rate)[spectrum.argmax()])


def encode_all(fmt: str, x: np.ndarray, rate: int = RATE) -> tuple[bytes, list[bytes]]:
    encoder = make_encoder(fmt, rate)
    parts = [encoder.encode(piece) for piece in in_pieces(x)]
    return b"".join(parts) + encoder.finish(), parts


def test_pcm16_scales_clips_and_is_little_endian():
    assert np.frombuffer(pcm16(np.array([0.0, 1.0, -1.0, 2.0, 0.5], np.float32)), "<i2").tolist() == [0, 32767, -32767, 32767, 16384]


def test_wav_header_and_body():
    x = tone(440, 0.3)
    data, parts = encode_all("wav", x)
    riff, size, wave, fmt_id, fmt_size, tag, channels, rate, byte_rate, align, bits, data_id, data_size = struct.unpack(
        "<4sI4s4sIHHIIHH4sI", data[:44]
    )
    assert (riff, wave, fmt_id, data_id) == (b"RIFF", b"WAVE", b"fmt ", b"data")
    assert (tag, channels, rate, byte_rate, align, bits) == (1, 1, RATE, 2 * RATE, 2, 16)
    assert size == data_size == WAV_UNKNOWN_SIZE
    assert data[44:] == pcm16(x)
    assert len(parts[0]) == 44 + 2 * 2048  # the header leaves with the first audio
    decoded = decode(data)
    assert decoded.samples.size == x.size and np.allclose(decoded.samples, x, atol=1e-4)


@pytest.mark.parametrize("fmt, decoded_rate", [("mp3", RATE), ("opus", 48000), ("aac", RATE), ("flac", RATE)])
def test_codec_streams_decode_to_the_input(fmt, decoded_rate):
    x = tone(440, 1.0)
    data, parts = encode_all(fmt, x)
    assert parts[0], f"{fmt}: the first piece must already produce bytes"
    decoded = decode(data)
    assert (decoded.sample_rate, decoded.channels) == (decoded_rate, 1)
    assert decoded.seconds == pytest.approx(1.0, abs=0.12)
    assert dominant_frequency(decoded.samples, decoded_rate) == pytest.approx(440, abs=5)
    if fmt == "flac":  # lossless: the input to within one 16-bit step (FFmpeg's own rounding)
        assert decoded.samples.size == x.size
        assert np.abs(decoded.samples - x).max() <= 2 / 32768


def test_codec_refuses_a_rate_it_cannot_carry():
    with pytest.raises(ValueError, match="cannot carry"):
        make_encoder("opus", 44100)


@pytest.mark.parametrize("target", [8000, 16000, 22050, 44100, 48000])
def test_streaming_resampler_equals_one_shot(target):
    x = tone(300, 0.5)
    streamed = StreamingResampler(RATE, target)
    pieces = np.concatenate([streamed.process(p) for p in in_pieces(x, 1000)] + [streamed.flush()])
    whole = StreamingResampler(RATE, target)
    reference = np.concatenate([whole.process(x), whole.flush()])
    assert pieces.size == reference.size
    assert np.allclose(pieces, reference, atol=1e-5)
    assert pieces.size == pytest.approx(x.size * target / RATE, abs=2)
    assert dominant_frequency(pieces, target) == pytest.approx(300, abs=4)


def test_equal_rates_pass_through_untouched():
    x = tone(300, 0.1)
    assert np.array_equal(StreamingResampler(RATE, RATE).process(x), x)


@pytest.mark.parametrize("speed", [0.25, 0.5, 0.8, 1.5, 2.0, 4.0])
def test_atempo_factors_multiply_to_speed_and_stay_in_range(speed):
    factors = atempo_factors(speed)
    assert np.prod(factors) == pytest.approx(speed)
    assert all(0.5 <= f <= 2.0 for f in factors)


@pytest.mark.parametrize("speed", [0.25, 0.7, 2.0, 4.0])
def test_tempo_changes_duration_but_not_pitch(speed):
    x = tone(440, 2.0)
    stretcher = TempoStretcher(RATE, speed)
    y = np.concatenate([stretcher.process(p) for p in in_pieces(x)] + [stretcher.flush()])
    assert y.size / RATE == pytest.approx(2.0 / speed, rel=0.03)
    assert dominant_frequency(y, RATE) == pytest.approx(440, abs=6)


def test_unit_speed_is_identity():
    x = tone(440, 0.2)
    stretcher = TempoStretcher(RATE, 1.0)
    assert np.array_equal(stretcher.process(x), x) and stretcher.flush().size == 0


def g711_expand(data: bytes, law: str) -> np.ndarray:
    """ITU-T G.711's decoding tables in closed form: bytes → float samples (a second reference,
    independent of FFmpeg's decoder)."""
    code = np.frombuffer(data, np.uint8).astype(np.int32)
    if law == "mulaw":
        code = ~code & 0xFF
        exponent, mantissa = (code >> 4) & 7, code & 0x0F
        magnitude = (((mantissa << 3) + 0x84) << exponent) - 0x84
        return np.where(code & 0x80, -magnitude, magnitude).astype(np.float32) / 32768.0
    code = code ^ 0x55
    exponent, mantissa = (code >> 4) & 7, code & 0x0F
    magnitude = np.where(exponent == 0, (mantissa << 4) + 8, ((mantissa << 4) + 0x108) << np.maximum(exponent - 1, 0))
    return np.where(code & 0x80, magnitude, -magnitude).astype(np.float32) / 32768.0


@pytest.mark.parametrize("law", ["mulaw", "alaw"])
@pytest.mark.parametrize("rate", [8000, 16000])
def test_g711_streams_one_byte_a_sample_that_decode_to_the_input(law, rate):
    x = tone(440, 0.5, rate)
    data, parts = encode_all(law, x, rate)
    assert [len(p) for p in parts] == [p.size for p in in_pieces(x)]  # nothing held back
    decoded = decode(data, law, rate)
    assert decoded.sample_rate == rate and decoded.samples.size == x.size
    assert np.array_equal(decoded.samples, g711_expand(data, law))  # FFmpeg agrees with the tables
    # G.711 keeps about 38 dB of signal-to-quantization noise on a loud tone.
    noise = np.mean((decoded.samples - x) ** 2)
    assert 10 * np.log10(np.mean(x ** 2) / noise) > 33


def test_g711_defaults_to_8khz_and_refuses_other_rates():
    from api.speech.audio.encoders import default_rate

    assert default_rate("mulaw", 24000) == default_rate("alaw", 24000) == 8000
    assert default_rate("pcm", 24000) == 24000
    with pytest.raises(ValueError, match="cannot carry"):
        make_encoder("mulaw", 24000)


def test_telephony_audio_is_band_limited_before_it_is_8khz():
    """A 6 kHz tone has no place below 4 kHz: resampled to 8 kHz it must vanish, not fold back
    to 2 kHz as it would if samples were merely dropped; a 1 kHz tone passes untouched."""
    from api.speech.audio.pipeline import AudioPipeline

    def through_mulaw(x: np.ndarray) -> np.ndarray:
        pipeline = AudioPipeline("mulaw", RATE, 8000, 1.0)
        data = b"".join(pipeline.process(p) for p in in_pieces(x)) + pipeline.finish()
        return g711_expand(data, "mulaw")

    passed, folded = through_mulaw(tone(1000, 1.0)), through_mulaw(tone(6000, 1.0))
    assert passed.size == pytest.approx(8000, abs=2) and dominant_frequency(passed, 8000) == pytest.approx(1000, abs=5)
    assert 10 * np.log10(np.mean(passed ** 2) / np.mean(folded ** 2)) > 40


def test_pyav_reference_decoder_is_independent_of_our_encoder():
    # Guard for the helpers above: a file written by PyAV directly decodes to what was written.
    import io

    buffer = io.BytesIO()
    with av.open(buffer, "w", format="wav") as container:
        stream = container.add_stream("pcm_s16le", rate=RATE, layout="mono")
        frame = av.AudioFrame.from_ndarray(np.array([[0, 1000, -1000]], np.int16), format="s16", layout="mono")
        frame.sample_rate = RATE
        container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    assert np.allclose(decode(buffer.getvalue()).samples * 32768, [0, 1000, -1000])


@pytest.mark.parametrize("response_format, speed, inline", [
    ("pcm", 1.0, True), ("wav", 1.0, True), ("mp3", 1.0, False), ("pcm", 1.25, False),
])
def test_short_raw_pcm_chunks_run_inline_and_the_bytes_are_the_same(response_format, speed, inline):
    """A short raw-PCM chunk at the model's speed is processed on the event loop (cheaper than a
    thread handoff); a codec, a stretch or a long chunk goes to a worker thread. Either way the
    bytes are those `process` makes."""
    rng = np.random.default_rng(0)
    chunks = [(0.1 * rng.standard_normal(n)).astype(np.float32) for n in (512, 2048, INLINE_SAMPLES + 1)]
    reference = AudioPipeline(response_format, 22050, 24000, speed)
    expected = b"".join(reference.process(c) for c in chunks) + reference.finish()
    pipeline = AudioPipeline(response_format, 22050, 24000, speed)
    threads = []
    process = pipeline.process

    def recording(pcm):
        threads.append(threading.current_thread() is threading.main_thread())
        return process(pcm)

    pipeline.process = recording

    async def run() -> bytes:
        return b"".join([await pipeline.process_off_loop(c) for c in chunks])

    assert asyncio.run(run()) + pipeline.finish() == expected
    assert threads == [inline, inline, False]  # the long chunk always goes to a thread
