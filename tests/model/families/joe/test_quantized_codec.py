"""joe's iSTFT decoder in int8 (model/families/joe/quantize.py) stays close to the float decoder:
its log-spectral distance to the float decoder's audio, on sentences it was not calibrated on,
whole and decoded incrementally in pieces, is within the bounds below; and a whole decode (the
engine's windows) is the same audio as the pieces, one graph serving both.

The bounds: median over frames at most LSD_MEDIAN_DB, 95th percentile at most LSD_P95_DB
(frames within 60 dB of the loudest). Measured when written, over the two sentences: about
3 / 5-7 dB; with the iSTFT's synthesis basis quantized too it was 17 dB, which these bounds
refuse. Whether it is heard is issue 32's WER check (benchmarks/intelligibility.py --codec).
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.voice_packages import require_voice_packages

require_voice_packages()

from model.families.joe.codec import load_joe_codec
from model.families.joe.quantize import CALIBRATION_TEXTS

LSD_MEDIAN_DB = 3.5
LSD_P95_DB = 8.0
TEXTS = ("Streams of speech arrive while others are still playing.", "Numbers like twelve and forty two are read as words.")


def log_spectral_distance(reference: np.ndarray, other: np.ndarray) -> tuple[float, float]:
    """Median and 95th percentile over frames (1024-sample Hann windows, hop 256) of the RMS
    difference of the two log-magnitude spectra, in dB, over the frames within 60 dB of the
    reference's loudest."""
    def spectrum(x: np.ndarray) -> np.ndarray:
        frames = np.lib.stride_tricks.sliding_window_view(x.astype(np.float64), 1024)[::256] * np.hanning(1024)
        return 20 * np.log10(np.abs(np.fft.rfft(frames, axis=-1)) + 1e-5)

    a, b = spectrum(reference), spectrum(other)
    keep = a.max(axis=1) > a.max() - 60
    distance = np.sqrt(np.mean((a[keep] - b[keep]) ** 2, axis=1))
    return float(np.median(distance)), float(np.percentile(distance, 95))


@pytest.fixture(scope="module")
def latents(latent_frontend) -> list[torch.Tensor]:
    assert not set(TEXTS) & set(CALIBRATION_TEXTS)
    return [torch.from_numpy(latent_frontend.run(text).latent) for text in TEXTS]


@pytest.fixture(scope="module")
def codecs():
    return load_joe_codec(codec="istft-onnxruntime"), load_joe_codec(codec="istft-int8")


def test_a_whole_decode_is_within_the_bounds(codecs, latents):
    float_codec, int8_codec = codecs
    for z in latents:
        reference, audio = float_codec.decode(z[None])[0].numpy(), int8_codec.decode(z[None])[0].numpy()
        assert audio.shape == reference.shape
        median, p95 = log_spectral_distance(reference, audio)
        assert median <= LSD_MEDIAN_DB and p95 <= LSD_P95_DB, (median, p95)


def test_the_incremental_decode_is_within_the_bounds(codecs, latents):
    float_codec, int8_codec = codecs
    inc = int8_codec.incremental
    for z in latents:
        reference = float_codec.decode(z[None])[0].numpy()
        state, pieces, fed = inc.initial_state(), [], 0
        for size in (8, 1, 3, 16, 5):  # pieces as the engine feeds them, then the rest
            audio, (state,) = inc.decode(z[None, fed:fed + size], [state], [fed], [len(z)])
            pieces.append(audio[0].numpy())
            fed += size
        audio, (state,) = inc.decode(z[None, fed:], [state], [fed], [len(z)])
        pieces.append(audio[0].numpy())
        # The incremental decoder's audio lags by delay_samples: line it up with the whole decode.
        streamed = np.concatenate(pieces)[inc.delay_samples:]
        median, p95 = log_spectral_distance(reference[:streamed.size], streamed)
        assert median <= LSD_MEDIAN_DB and p95 <= LSD_P95_DB, (median, p95)
        # Windows (a stream's first chunk) decode through the same graph: the same audio.
        whole = int8_codec.decode(z[None])[0].numpy()
        np.testing.assert_allclose(whole[:streamed.size], streamed, atol=1e-5)


def test_only_the_istft_decoder_has_an_int8_form():
    with pytest.raises(ValueError, match="int8"):
        load_joe_codec(codec="hifigan-int8")
