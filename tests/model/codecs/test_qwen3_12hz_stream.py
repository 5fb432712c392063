"""The 12 Hz codec decoded incrementally equals its whole decode: any split of a stream into
pieces, streams batched at different positions, and the causal streaming layers it is built from.

The tiny checkpoint's attention window (8 frames) is shorter than the streams, so pieces cross it.
"""
from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from model.codecs.qwen3_12hz import Qwen3Codec12Hz
from model.codecs.streaming_conv import StreamingConv, StreamingUpsample
from model.families.qwen3_tts.tiny_random import ensure_tiny_qwen3

TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def codec(chorus_cache) -> Qwen3Codec12Hz:
    return Qwen3Codec12Hz.from_folder(ensure_tiny_qwen3() / "speech_tokenizer")


def random_codes(codec: Qwen3Codec12Hz, streams: int, frames: int, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, codec.config.codebook_size, (streams, frames, *codec.frame_shape), generator=generator)


def test_pieces_of_any_size_equal_the_whole_decode(codec):
    codes = random_codes(codec, 2, 40, seed=0)
    whole = codec.decode(codes)
    incremental = codec.incremental
    assert incremental.delay_samples == 0
    states, fed, pieces = incremental.initial_states(2), 0, []
    for size in (1, 2, 5, 3, 1, 9, 4, 15):
        audio, states = incremental.step(codes[:, fed : fed + size], torch.tensor([fed, fed]), states)
        pieces.append(audio)
        fed += size
    assert fed == codes.shape[1]
    assert (torch.cat(pieces, dim=1) - whole).abs().max() <= TOLERANCE


def test_streams_batched_at_different_positions_decode_each_as_alone(codec):
    """Three streams reach a shared batch 13, 5 and 0 frames in, through the per-stream protocol."""
    codes = random_codes(codec, 3, 30, seed=1)
    incremental = codec.incremental
    heads = (13, 5, 0)
    states, audio = [], []
    for stream, head in enumerate(heads):
        state = incremental.initial_state()
        if head:
            samples, (state,) = incremental.decode(codes[stream : stream + 1, :head], [state], [0], [None])
            audio.append([samples[0]])
        else:
            audio.append([])
        states.append(state)
    fed = list(heads)
    for size in (4, 1, 3):
        batch = torch.stack([codes[stream, at : at + size] for stream, at in enumerate(fed)])
        samples, states = incremental.decode(batch, states, fed, [None] * 3)
        for stream in range(3):
            audio[stream].append(samples[stream])
        fed = [at + size for at in fed]
    for stream in range(3):
        whole = codec.decode(codes[stream : stream + 1, : fed[stream]])[0]
        assert (torch.cat(audio[stream]) - whole).abs().max() <= TOLERANCE, stream


def test_states_are_the_fixed_shapes_it_declares(codec):
    incremental = codec.incremental
    shapes = incremental.state_shapes()
    assert [(tuple(s.shape), s.dtype) for s in incremental.initial_state()] == shapes
    _, states = incremental.step(random_codes(codec, 2, 3, seed=2), torch.tensor([0, 7]), incremental.initial_states(2))
    assert [(tuple(s.shape[1:]), s.dtype) for s in states] == shapes and all(s.shape[0] == 2 for s in states)
    config = codec.config
    window = (config.num_hidden_layers, config.num_key_value_heads, config.sliding_window - 1, config.head_dim)
    assert shapes[0][0] == shapes[1][0] == window  # keys, values


def _streamed(layer, x: torch.Tensor, pieces: tuple[int, ...]) -> torch.Tensor:
    state, fed, out = torch.zeros(x.shape[0], layer.channels, layer.state_length), 0, []
    for size in pieces:
        y, state = layer(x[..., fed : fed + size], state)
        out.append(y)
        fed += size
    return torch.cat(out, dim=-1)


def test_a_causal_conv_streams_as_its_left_padded_whole():
    torch.manual_seed(0)
    conv = nn.Conv1d(4, 4, 5, dilation=3, groups=2)
    x = torch.randn(2, 4, 23)
    padded = F.pad(x, ((5 - 1) * 3, 0))
    with torch.no_grad():
        for residual in (False, True):
            layer = StreamingConv(conv, slope=0.1, residual=residual, causal=True)
            whole = conv(F.leaky_relu(padded, 0.1)) + (x if residual else 0)
            assert layer.delay == 0
            assert (_streamed(layer, x, (1, 7, 2, 13)) - whole).abs().max() <= 1e-6


def test_a_causal_transposed_conv_streams_as_its_right_cropped_whole():
    torch.manual_seed(0)
    up = nn.ConvTranspose1d(3, 2, 8, stride=4)
    x = torch.randn(2, 3, 11)
    with torch.no_grad():
        whole = up(x)[..., : 11 * 4]
        layer = StreamingUpsample.of(up, None, causal=True)
        assert layer.padding == 0
        assert (_streamed(layer, x, (3, 1, 7)) - whole).abs().max() <= 1e-6
    with pytest.raises(ValueError, match="padding"):
        StreamingUpsample.of(nn.ConvTranspose1d(3, 2, 8, stride=4, padding=2), None, causal=True)
    with pytest.raises(ValueError, match="unpadded"):
        StreamingConv(nn.Conv1d(2, 2, 3, padding=1), causal=True)
