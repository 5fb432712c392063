"""The audio stage: deferring each step's audio by one step (as the CUDA side stream does) changes
when chunks arrive, never which chunks a stream gets; without a runner nothing is deferred."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import Tensor

from capacity.config import CapacityConfig
from capacity.listener import Listener
from engine.audio.config import StreamingConfig
from engine.audio.decoder import StreamingDecoder
from engine.audio.runners import CudaStreamRunner, runner_for
from engine.audio.stage import AudioStage
from engine.gpu_config import GpuConfig
from model.codecs.base import FrameCodec
from model.sampling import SamplingParams
from tests.engine.conftest import drain


class NeighbourCodec(FrameCodec):
    """Non-causal: frame i's samples ramp from its own value towards frame i+1's (0 past the end)."""

    sample_rate = 8000
    samples_per_frame = 8
    frame_shape = (2,)
    frame_dtype = torch.float32

    def decode(self, frames: Tensor) -> Tensor:
        value = frames.sum(-1)
        following = torch.cat([value[:, 1:], torch.zeros_like(value[:, :1])], dim=1)
        ramp = torch.linspace(0, 1, self.samples_per_frame)
        audio = value[..., None] * (1 - ramp) + following[..., None] * ramp
        return audio.flatten(1)


class HostRunner:
    """A runner without a device stream: the deferral logic of the CUDA path, run on the CPU."""

    def __init__(self) -> None:
        self.decodes = 0

    def decode(self, codec: FrameCodec, batch: Tensor) -> Tensor:
        self.decodes += 1
        return codec.decode(batch)

    def to_host(self, audio: Tensor) -> np.ndarray:
        return audio.float().cpu().numpy()


class LateRunner(HostRunner):
    """Decodes only when the audio is brought to the host, as a device stream's error surfaces
    only at the synchronisation: a bad batch fails in `collect`, not at launch."""

    def decode(self, codec: FrameCodec, batch: Tensor):
        self.decodes += 1
        return lambda: codec.decode(batch)

    def to_host(self, audio) -> np.ndarray:
        return audio().float().cpu().numpy()


def tick(stage: AudioStage, now: float = 0.0) -> dict:
    """One engine step's audio: the chunks ready (with a runner: those launched a step ago), then
    the next launch. Fixed chunking: the moment changes nothing."""
    ready = stage.step(now)
    stage.launch_next(now)
    return ready


def run_rounds(stage: AudioStage, lengths: dict[str, int], rounds: int) -> dict[str, list]:
    """Pushes one frame per round to every stream until its length, finishes it, then steps
    until every stream's last chunk is out; returns (round, frame_start, frame_end, pcm) per stream."""
    generator = torch.Generator().manual_seed(0)
    frames = {sid: torch.randn(n, 2, generator=generator) for sid, n in lengths.items()}
    for sid in lengths:
        stage.open(sid, Listener(stage.decoder.codec.sample_rate))
    got: dict[str, list] = {sid: [] for sid in lengths}
    for step in range(rounds):
        for sid, n in lengths.items():
            if step < n:
                stage.push(sid, frames[sid][step : step + 1])
            elif step == n:
                stage.finish(sid)
        for sid, chunk in tick(stage).items():
            got[sid].append((step, chunk.frame_start, chunk.frame_end, chunk.pcm, chunk.is_last))
    return got


LENGTHS = {"a": 3, "b": 11, "c": 17, "d": 1}
# Fixed chunking (no wall-clock urgency), so the direct and deferred runs cut the same windows.
CONFIG = StreamingConfig(first_chunk_frames=1, chunk_frames=3, left_context_frames=2,
                         lookahead_frames=1, first_lookahead_frames=1, crossfade_samples=4, grow_chunks=False)
CAPACITY = CapacityConfig(urgent_slack_seconds=0, defer_slack_seconds=math.inf)


def stage(codec: FrameCodec, runner) -> AudioStage:
    return AudioStage(StreamingDecoder(codec, CONFIG, capacity=CAPACITY), runner)


def test_deferred_audio_is_the_same_chunks_one_step_later():
    direct = run_rounds(stage(NeighbourCodec(), None), LENGTHS, 25)
    runner = HostRunner()
    deferred = run_rounds(stage(NeighbourCodec(), runner), LENGTHS, 25)
    assert runner.decodes > 0
    for sid in LENGTHS:
        assert len(direct[sid]) == len(deferred[sid]) >= min(LENGTHS[sid], 2)
        assert direct[sid][-1][4] and deferred[sid][-1][4]
        for (s0, a0, b0, pcm0, last0), (s1, a1, b1, pcm1, last1) in zip(direct[sid], deferred[sid]):
            assert (s1, a1, b1, last1) == (s0 + 1, a0, b0, last0)
            np.testing.assert_array_equal(pcm0, pcm1)
        audio = np.concatenate([c[3] for c in deferred[sid]])
        assert len(audio) == LENGTHS[sid] * NeighbourCodec.samples_per_frame


def test_stream_reopened_while_its_audio_is_in_flight_gets_none_of_it():
    audio = stage(NeighbourCodec(), HostRunner())
    audio.open("s", Listener(NeighbourCodec.sample_rate))
    audio.push("s", torch.ones(2, 2))
    assert tick(audio) == {}  # the first window is launched, not yet collected
    audio.discard("s")
    audio.open("s", Listener(NeighbourCodec.sample_rate))
    assert tick(audio) == {}
    audio.push("s", torch.full((2, 2), 3.0))
    tick(audio)
    chunk = tick(audio)["s"]
    assert (chunk.frame_start, chunk.frame_end) == (0, 1)
    np.testing.assert_allclose(chunk.pcm[:4], 6.0)


class PickyCodec(NeighbourCodec):
    """Refuses any batch holding a frame above 100, as a codec refuses out-of-range codes."""

    def decode(self, frames: Tensor) -> Tensor:
        if (frames > 100).any():
            raise ValueError("frame out of range")
        return super().decode(frames)


@pytest.mark.parametrize("runner", [None, HostRunner(), LateRunner()])
def test_a_window_that_fails_to_decode_closes_only_its_stream(runner):
    audio = stage(PickyCodec(), runner)
    for sid, value in (("good", 1.0), ("bad", 1000.0)):
        audio.open(sid, Listener(PickyCodec.sample_rate))
        audio.push(sid, torch.full((2, 2), value))
    ready = {**tick(audio), **tick(audio)}
    assert list(ready) == ["good"] and (ready["good"].frame_start, ready["good"].frame_end) == (0, 1)
    failures = audio.take_failures()
    assert list(failures) == ["bad"] and isinstance(failures["bad"], ValueError)
    assert audio.decoder.num_streams == 1


def test_cpu_and_disabled_overlap_decode_within_the_step():
    assert runner_for(NeighbourCodec(), CONFIG, GpuConfig(), torch.device("cpu"), max_num_seqs=4) is None
    off = GpuConfig(overlap_codec=False)
    assert runner_for(NeighbourCodec(), CONFIG, off, torch.device("cuda"), max_num_seqs=4) is None


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_side_stream_gives_the_same_chunks_as_the_host():
    class CudaNeighbourCodec(NeighbourCodec):
        def decode(self, frames: Tensor) -> Tensor:
            return super().decode(frames.cuda()).to(frames.device)

    host = run_rounds(stage(NeighbourCodec(), HostRunner()), LENGTHS, 25)
    cuda = run_rounds(stage(CudaNeighbourCodec(), CudaStreamRunner(torch.device("cuda"))), LENGTHS, 25)
    for sid in LENGTHS:
        assert [c[:3] for c in host[sid]] == [c[:3] for c in cuda[sid]]
        for a, b in zip(host[sid], cuda[sid]):
            np.testing.assert_allclose(a[3], b[3], atol=1e-6)


def test_engine_with_deferred_codec_emits_the_same_audio(make_core, tiny_frontend):
    def run(deferred: bool, abort: str | None = None) -> dict[str, list]:
        core = make_core(num_blocks=64, max_num_seqs=4)
        if deferred:
            core.audio.runner = HostRunner()  # the CUDA path's deferral, on the CPU
        for i in range(3):
            params = SamplingParams(temperature=0.8, top_p=0.95, seed=i, max_tokens=7 * (2 + i))
            core.add_request(f"r{i}", tiny_frontend.prepare(f"voice {i}", "tara"), params)
        if abort:
            for _ in range(4):
                core.step()
            core.abort_request(abort)
        chunks = drain(core)
        assert core.kv_manager.num_free_blocks == core.kv_manager.num_blocks
        return chunks

    direct, deferred = run(False), run(True)
    assert sorted(direct) == sorted(deferred) == ["r0", "r1", "r2"]
    for rid in direct:
        assert [c.finished for c in deferred[rid]].count(True) == 1 and deferred[rid][-1].finished
        assert deferred[rid][-1].finish_reason == direct[rid][-1].finish_reason
        np.testing.assert_array_equal(
            np.concatenate([c.pcm for c in direct[rid]]), np.concatenate([c.pcm for c in deferred[rid]])
        )
    aborted = run(True, abort="r2")
    assert aborted["r2"][-1].finish_reason == "abort"
    assert [c.finished for c in aborted["r2"]].count(True) == 1


def test_a_codec_with_state_slots_decodes_from_them_even_where_a_side_stream_is_offered(monkeypatch, chorus_cache):
    """Qwen3-TTS's 12 Hz decoder keeps each stream's state in the pool admission counts, on a GPU
    too: the stage never asks for a side-stream runner for it; a codec without such a decoder
    takes the runner offered and decodes windows (`runner_for` stands in for a GPU's here)."""
    from model.codecs.qwen3_12hz import Qwen3Codec12Hz
    from model.config import ModelConfig
    from model.loader import load_family

    offered = HostRunner()
    asked: list[FrameCodec] = []

    def gpu_runner(codec, *args, **kwargs):
        asked.append(codec)
        return offered

    monkeypatch.setattr("engine.audio.stage.runner_for", gpu_runner)
    qwen3 = load_family(ModelConfig(model="tiny-random-qwen3", device="cpu", dtype="float32")).codec
    assert isinstance(qwen3, Qwen3Codec12Hz)
    built = AudioStage.build(qwen3, StreamingConfig().resolve(qwen3.window_hints), CapacityConfig(), GpuConfig(),
                             torch.device("cpu"), max_num_seqs=4)
    assert asked == [] and built.runner is None
    assert built.decoder.state_pool is not None and built.free_state_slots == 8
    plain = AudioStage.build(NeighbourCodec(), CONFIG, CAPACITY, GpuConfig(), torch.device("cpu"), max_num_seqs=4)
    assert asked == [plain.decoder.codec] and plain.runner is offered and plain.decoder.state_pool is None
