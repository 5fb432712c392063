"""Codec primers: a stream with a codec prefix starts from the state the prefix leaves, so its audio
is the tail of a whole decode of prefix and frames; each prefix is decoded once while it is kept,
within a budget of bytes (least recently used dropped, decoded again when asked for again)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from capacity.config import CapacityConfig
from capacity.listener import Listener
from engine.audio.config import StreamingConfig
from engine.audio.primers import CodecPrimers
from engine.audio.stage import AudioStage
from engine.gpu_config import GpuConfig
from model.config import ModelConfig
from model.loader import load_family

PREFIX, FRAMES = 9, 7


@pytest.fixture(scope="module")
def codec(chorus_cache):
    return load_family(ModelConfig(model="tiny-random-qwen3", device="cpu", dtype="float32")).codec


def frames_of(codec, count: int, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, 64, (count, *codec.frame_shape), generator=generator, dtype=codec.frame_dtype)


def stage_of(codec, primer_bytes: int = 2**30) -> AudioStage:
    config = StreamingConfig().resolve(codec.window_hints)
    return AudioStage.build(codec, config, CapacityConfig(), GpuConfig(), torch.device("cpu"), max_num_seqs=4,
                            primer_bytes=primer_bytes)


def spoken(stage: AudioStage, stream_id: str, frames: torch.Tensor, prefix: torch.Tensor | None) -> np.ndarray:
    """A stream's whole audio through the stage, its first chunk as early as the stage sends it."""
    stage.open(stream_id, Listener(), prefix)
    stage.push(stream_id, frames)
    stage.finish(stream_id)
    chunks, now = [], 0.0
    while not chunks or not chunks[-1].is_last:
        if (chunk := stage.step(now).get(stream_id)) is not None:
            chunks.append(chunk)
        now += 0.1
    return np.concatenate([chunk.pcm for chunk in chunks])


def test_a_primed_stream_speaks_the_tail_of_the_whole_decode(codec):
    prefix, frames = frames_of(codec, PREFIX, 1), frames_of(codec, FRAMES, 2)
    whole = codec.decode(torch.cat([prefix, frames])[None])[0].numpy()
    spf = codec.samples_per_frame
    stage = stage_of(codec)
    primed = spoken(stage, "primed", frames, prefix)
    silent = spoken(stage, "silent", frames, None)
    assert primed.size == silent.size == FRAMES * spf
    assert np.abs(primed - whole[PREFIX * spf:]).max() <= 1e-5
    assert np.abs(silent - whole[PREFIX * spf:]).max() > 1e-2  # from silence it is another audio
    assert stage.decoder.state_pool.num_free == stage.decoder.state_pool.num_slots


def test_a_prefix_is_decoded_once_while_it_is_kept(codec):
    stage = stage_of(codec)
    prefix = frames_of(codec, PREFIX, 3)
    first = spoken(stage, "a", frames_of(codec, FRAMES, 4), prefix)
    second = spoken(stage, "b", frames_of(codec, FRAMES, 4), prefix.clone())
    assert stage.primers.made == 1 and len(stage.primers) == 1
    np.testing.assert_array_equal(first, second)


def test_the_least_recently_used_is_dropped_within_the_budget_and_decoded_again(codec):
    stage = stage_of(codec)
    size = stage.primers.primer(frames_of(codec, PREFIX, 5)).nbytes
    primers = CodecPrimers(stage.primers.decoder, budget_bytes=2 * size)
    a, b, c = (frames_of(codec, PREFIX, seed) for seed in (6, 7, 8))
    primers.primer(a)
    primers.primer(b)
    primers.primer(a)  # a is now the more recent
    primers.primer(c)  # b goes
    assert primers.made == 3 and len(primers) == 2 and primers.kept_bytes <= 2 * size
    primers.primer(a)
    assert primers.made == 3
    again = primers.primer(b)
    assert primers.made == 4 and again.frames == PREFIX


def test_a_primer_over_the_whole_budget_is_used_but_never_kept(codec):
    stage = stage_of(codec, primer_bytes=1)
    prefix = frames_of(codec, PREFIX, 9)
    spoken(stage, "a", frames_of(codec, FRAMES, 1), prefix)
    spoken(stage, "b", frames_of(codec, FRAMES, 1), prefix)
    assert stage.primers.made == 2 and len(stage.primers) == 0 and stage.primers.kept_bytes == 0


def test_a_prefix_of_frames_not_the_codecs_is_refused_before_any_slot_is_taken(codec):
    stage = stage_of(codec)
    free = stage.decoder.state_pool.num_free
    with pytest.raises(ValueError):
        stage.open("bad", Listener(), torch.full((3, *codec.frame_shape), 10_000, dtype=codec.frame_dtype))
    assert stage.decoder.state_pool.num_free == free and stage.primers.made == 0
