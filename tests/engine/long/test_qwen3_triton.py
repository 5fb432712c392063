"""Qwen3-TTS on the Triton paged-attention backend (talker and code predictor), under Triton's
interpreter on the CPU: the first frames equal the reference's greedy codes (on a GPU the same
test runs the compiled kernels)."""
from __future__ import annotations

import os

import numpy as np
import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")  # before anything imports triton
pytest.importorskip("triton")

from model.config import ModelConfig  # noqa: E402
from model.loader import load_family  # noqa: E402
from tests.engine.long.test_qwen3_parity import CASES, frontends, golden, greedy, prompt_of, run  # noqa: E402,F401

FRAMES = 4  # the interpreter runs a kernel call in ~0.05 s: a frame is 1 talker + 15 predictor forwards


def test_triton_backend_gives_the_reference_codes(frontends, golden):  # noqa: F811 - fixtures
    device = "cuda" if torch.cuda.is_available() else "cpu"
    family = load_family(ModelConfig(model="tiny-random-qwen3", device=device, dtype="float32",
                                     attention_backend="triton"))
    assert type(family.backbone.attention_backend).__name__ == "TritonBackend"
    case = next(c for c in CASES if c["name"] == "cv_vivian_auto_en_stream")
    params = greedy(case).replace(max_tokens=FRAMES)
    frames, _ = run(family, {"solo": (prompt_of(case, frontends, golden), params)})
    np.testing.assert_array_equal(frames["solo"], golden[f"codes_{case['name']}"][:FRAMES])
