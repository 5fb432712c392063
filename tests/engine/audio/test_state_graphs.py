"""GraphedSlottedDecoder (engine/audio/state_graphs.py): the 12 Hz codec's incremental steps
through fixed-shape buffers (replayed from CUDA graphs on a GPU; run directly over the same
buffers here) give the audio and states of the decoder's own step, padded rows dropped (within
1e-4, the parity suite's audio bound: a padded batch can sum in another order)."""
from __future__ import annotations

import pytest
import torch

from engine.audio.state_graphs import GraphedSlottedDecoder
from model.codecs.qwen3_12hz import Qwen3Codec12Hz
from model.families.qwen3_tts.tiny_random import ensure_tiny_qwen3


@pytest.fixture(scope="module")
def codec(chorus_cache) -> Qwen3Codec12Hz:
    return Qwen3Codec12Hz.from_folder(ensure_tiny_qwen3() / "speech_tokenizer")


def codes(codec: Qwen3Codec12Hz, streams: int, frames: int, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, codec.config.codebook_size, (streams, frames, *codec.frame_shape),
                         generator=generator).to(codec.frame_dtype)


def test_graphed_steps_give_the_decoders_own_audio_and_states(codec):
    plain = codec.incremental
    graphed = GraphedSlottedDecoder(plain, codec.frame_shape, codec.frame_dtype, [1, 2, 4], [1, 4],
                                    torch.device("cpu"), eager_replay=True)
    streams = 3  # padded to 4
    # Streams of different histories: each fed a different number of frames before.
    states = plain.initial_states(streams)
    before = torch.tensor([0, 0, 0])
    for row, history in enumerate((0, 5, 9)):
        if history:
            _, state = plain.step(codes(codec, 1, history, seed=row), torch.tensor([0]),
                                  [s[row : row + 1] for s in states])
            for batched, new in zip(states, state):
                batched[row : row + 1] = new
            before[row] = history
    for n, seed in ((1, 10), (4, 11), (3, 12)):  # 3 frames: no graph of that length, the eager step
        frames = codes(codec, streams, n, seed)
        want_audio, want_states = plain.step(frames, before, states)
        audio, new_states = graphed.step(frames, before, states)
        assert audio.shape == want_audio.shape
        torch.testing.assert_close(audio, want_audio, rtol=0, atol=1e-4)
        for got, want in zip(new_states, want_states, strict=True):
            assert got.shape == want.shape
            torch.testing.assert_close(got, want, rtol=0, atol=1e-4)
        states, before = [s.clone() for s in want_states], before + n


def test_the_streaming_decoder_sees_a_slotted_decoder(codec):
    from model.codecs.base import SlottedDecoder

    graphed = GraphedSlottedDecoder(codec.incremental, codec.frame_shape, codec.frame_dtype, [1], [1],
                                    torch.device("cpu"), eager_replay=True)
    assert isinstance(graphed, SlottedDecoder) and graphed.delay_samples == 0
    assert graphed.state_shapes() == codec.incremental.state_shapes()


def test_every_shape_writes_its_results_into_the_same_buffers(codec):
    """One set of output buffers for all graphs: kept per graph, a shape's outputs would stay
    allocated for each (batch size, length) captured (GiBs for the released codec)."""
    graphed = GraphedSlottedDecoder(codec.incremental, codec.frame_shape, codec.frame_dtype, [1, 2, 4], [1, 4],
                                    torch.device("cpu"), eager_replay=True)
    storages = set()
    for streams, n in ((3, 1), (1, 4), (2, 1)):
        audio, states = graphed.step(codes(codec, streams, n, seed=n), torch.zeros(streams, dtype=torch.long),
                                     codec.incremental.initial_states(streams))
        assert audio.shape[0] == streams and all(state.shape[0] == streams for state in states)
        storages.add(tuple(state.untyped_storage().data_ptr() for state in states))
    assert len(storages) == 1
