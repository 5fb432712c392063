"""Qwen3Family.embed at decode positions: a frame's code embeddings plus the text the talker reads
then, whether that text is tts_pad (its track projected once, family.pad_text_track) or a text id."""
from __future__ import annotations

import pytest
import torch

from model.config import ModelConfig
from model.loader import load_family, load_frontend


@pytest.fixture(scope="module")
def qwen3(chorus_cache):
    config = ModelConfig(model="tiny-random-qwen3", device="cpu", dtype="float32")
    return load_family(config), load_frontend(ModelConfig(model="tiny-random-qwen3"))


def decode_input(family, stream, frame: int, text_id: int) -> torch.Tensor:
    """What the reference sums at a decode position, computed here from the tables themselves."""
    codes = stream.frame_codes(frame)
    tables = family.predictor.code_embeddings
    with torch.no_grad():
        text = family.text(torch.tensor([text_id]))[0]
        audio = family.backbone.embed_tokens(torch.tensor([codes[0]]))[0]
        audio = audio + sum(tables[j - 1, code] for j, code in enumerate(codes) if j)
    return text + audio


def with_frames(family, frontend, text: str, non_streaming: bool, frames: int = 3):
    stream = family.new_stream(frontend.prepare(text, frontend.voices[0], non_streaming=non_streaming),
                               frontend.default_sampling())
    for k in range(frames):
        stream.append_frame([(7 * k + j) % 64 for j in range(family.config.num_code_groups)])
    return stream


def test_whole_text_decode_rows_read_the_pad_track_and_their_frame(qwen3):
    family, frontend = qwen3
    whole = [with_frames(family, frontend, text, non_streaming=True) for text in ("Hello there.", "A second one.")]
    spans = [(stream, stream.prompt_len, stream.prompt_len + 3) for stream in whole]  # three decode rows each
    with torch.inference_mode():
        rows = family.embed(spans)
    pad = family.config.text.tts_pad
    expected = torch.stack([decode_input(family, stream, k, pad) for stream in whole for k in range(3)])
    torch.testing.assert_close(rows, expected, rtol=0, atol=1e-5)


def test_a_row_that_reads_text_beside_pad_rows_gets_that_texts_track(qwen3):
    family, frontend = qwen3
    whole = with_frames(family, frontend, "Hello there.", non_streaming=True)
    streaming = with_frames(family, frontend, "Text read while speaking.", non_streaming=False)
    text_id = streaming.trailing_id(1)
    assert text_id != family.config.text.tts_pad  # the streaming prompt leaves text to read
    spans = [(whole, whole.prompt_len + 1, whole.prompt_len + 2), (streaming, streaming.prompt_len + 1,
                                                                    streaming.prompt_len + 2)]
    with torch.inference_mode():
        rows = family.embed(spans)
        alone = family.embed(spans[:1])  # all pad: the projected-once track
    expected = torch.stack([decode_input(family, whole, 1, family.config.text.tts_pad),
                            decode_input(family, streaming, 1, text_id)])
    torch.testing.assert_close(rows, expected, rtol=0, atol=1e-5)
    torch.testing.assert_close(alone[0], rows[0], rtol=0, atol=1e-5)
