"""The joe student's products of several rows in bfloat16 (model/llama/low_precision_linear.py,
on by default where the CPU has AVX-512 BF16 or AMX) stay close to float32: streams served
together (every decode step a product of several rows) sound as they do in float32, within the
log-spectral bounds below, and the bfloat16 path really ran.

The bounds, on the audio of each stream against the same stream served in float32, both through
the float decoder: median over frames at most LSD_MEDIAN_DB, 95th percentile at most LSD_P95_DB
(log_spectral_distance of tests/model/families/joe/test_quantized_codec.py). Measured when
written: 0.16-0.28 / 0.8-1.4 dB. (Through the int8 decoder the same streams differ by 3.5 / 6 dB:
its activations' rounding turns small changes of its input into that much noise either way, so
that decoder would measure itself, not the student.) Whether it is heard:
benchmarks/intelligibility.py, in the closing note of issue 32.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tests.voice_packages import require_voice_packages

require_voice_packages()

from model.llama.low_precision_linear import LowPrecisionLinear, cpu_has_bf16_matmul
from model.loader import load_frontend
from model.sampling import SamplingParams
from tests.engine.conftest import core_on_step_clock, drain, engine_config
from tests.model.families.joe.test_quantized_codec import log_spectral_distance

LSD_MEDIAN_DB = 1.0
LSD_P95_DB = 3.0
CODEC = "istft-onnxruntime"  # the float decoder
TEXTS = ("Streams of speech arrive while others are still playing.",
         "Numbers like twelve and forty two are read as words.",
         "Is this the last question of the day?",
         "The quick brown fox jumps over the lazy dog.")


def served(precision: str) -> tuple[dict[str, np.ndarray], object]:
    config = engine_config("joe")
    config.model = dataclasses.replace(config.model, cpu_batch_precision=precision, codec=CODEC)
    core = core_on_step_clock(config)
    frontend = load_frontend(config.model)
    for i, text in enumerate(TEXTS):  # all at once: every decode step has a row per stream
        core.add_request(f"r{i}", frontend.prepare(text, "joe"), SamplingParams(max_tokens=4096))
    chunks = drain(core)
    return {rid: np.concatenate([c.pcm for c in cs]) for rid, cs in chunks.items()}, core.family.student


@pytest.mark.skipif(not cpu_has_bf16_matmul(), reason="this CPU has no bfloat16 matrix instructions")
def test_streams_served_in_bfloat16_sound_as_in_float32():
    exact, exact_student = served("float32")
    rounded, student = served("bfloat16")
    linears = [m for m in student.modules() if isinstance(m, LowPrecisionLinear)]
    assert linears and all(m.bf16_weight is not None for m in linears)
    assert all(m.bf16_weight is None for m in exact_student.modules() if isinstance(m, LowPrecisionLinear))
    assert exact.keys() == rounded.keys() == {f"r{i}" for i in range(len(TEXTS))}
    for rid, reference in exact.items():
        assert rounded[rid].shape == reference.shape  # the prompt fixes the length
        assert not np.array_equal(rounded[rid], reference)  # the bfloat16 products really ran
        median, p95 = log_spectral_distance(reference, rounded[rid])
        assert median <= LSD_MEDIAN_DB and p95 <= LSD_P95_DB, (rid, median, p95)
