"""Qwen3Stream (model/families/qwen3_tts/stream.py): its frames as the family accepted them."""
from __future__ import annotations

import random

from model.config import ModelConfig
from model.loader import load_family, load_frontend


def test_each_frames_codes_read_back_as_they_were_accepted(chorus_cache):
    family = load_family(ModelConfig(model="tiny-random-qwen3", device="cpu", dtype="float32"))
    frontend = load_frontend(ModelConfig(model="tiny-random-qwen3"))
    stream = family.new_stream(frontend.prepare("Hello there.", frontend.voices[0]), frontend.default_sampling())
    rng = random.Random(0)
    groups = family.config.num_code_groups
    frames = [[rng.randrange(64) for _ in range(groups)] for _ in range(40)]  # the buffer grows twice
    for k, codes in enumerate(frames):
        pushed = stream.append_frame(codes)
        assert pushed.tolist() == [codes]  # what goes to the audio stage
        assert stream.frame_codes(k) == codes  # what the next step's input reads
    assert [stream.frame_codes(k) for k in range(len(frames))] == frames
    assert stream.frames[: stream.num_frames].tolist() == frames
