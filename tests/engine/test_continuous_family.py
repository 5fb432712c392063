"""A family whose steps take and emit continuous frames (like the built-in voice's latent z)
runs through the same engine: paged KV, chunked prefill, preemption, streaming codec."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
from torch import nn

from capacity.config import CapacityConfig
from model.attention import get_attention_backend
from model.codecs.base import FrameCodec
from model.families.base import FrameUpdate, SpeechFamily, SpeechPrompt, StreamState
from model.llama.config import LlamaArchConfig
from model.llama.model import LlamaModel
from model.sampling import SamplingParams

from .conftest import core_on_step_clock, drain, engine_config, started

LATENT = 6
COND = 4


class LatentStream(StreamState):
    """Frames emitted so far; position prompt_len + i takes frame i-1 (zeros for i = 0) plus the
    time-aligned conditioning row i as input."""

    def __init__(self, prompt: SpeechPrompt, params: SamplingParams) -> None:
        super().__init__(prompt, params)
        self.outputs: list[torch.Tensor] = []

    @property
    def max_outputs(self) -> int:
        return self.prompt.num_frames


class ToyLatentCodec(FrameCodec):
    """Each latent frame becomes 256 samples (a HiFi-GAN hop): a fixed linear map, so decoding is exact per frame."""

    sample_rate = 16000
    samples_per_frame = 256
    frame_shape = (LATENT,)
    frame_dtype = torch.float32

    def __init__(self) -> None:
        self.basis = torch.randn(LATENT, self.samples_per_frame, generator=torch.Generator().manual_seed(1)) * 0.1

    def decode(self, frames: torch.Tensor) -> torch.Tensor:
        return torch.tanh(frames @ self.basis).reshape(frames.shape[0], -1)


class ToyLatentFamily(SpeechFamily):
    name = "toy-latent"

    def __init__(self) -> None:
        torch.manual_seed(0)
        arch = LlamaArchConfig.from_hf_dict(dict(
            vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
        ))
        # The family's own embed reads the Llama; the engine reads `backbone`, which may wrap it.
        self.decoder = LlamaModel(arch, get_attention_backend("torch"))
        self.backbone = self.decoder
        for p in self.decoder.parameters():
            nn.init.normal_(p, std=0.2)
        self.frame_in = nn.Linear(LATENT + COND, 32)
        self.frame_out = nn.Linear(32, LATENT)
        self.codec = ToyLatentCodec()

    @property
    def max_model_len(self) -> int:
        return 512

    def new_stream(self, prompt: SpeechPrompt, params: SamplingParams) -> LatentStream:
        return LatentStream(prompt, params)

    @torch.inference_mode()
    def embed(self, spans: Sequence[tuple[StreamState, int, int]]) -> torch.Tensor:
        rows = []
        for stream, start, end in spans:
            for pos in range(start, end):
                if pos < stream.prompt_len:
                    rows.append(self.decoder.embed_tokens(torch.tensor([stream.prompt.token_ids[pos]]))[0])
                    continue
                i = pos - stream.prompt_len
                prev = stream.outputs[i - 1] if i else torch.zeros(LATENT)
                rows.append(self.frame_in(torch.cat([prev, stream.prompt.conditioning[i]])))
        return torch.stack(rows)

    @torch.inference_mode()
    def head(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.frame_out(hidden)

    def emit(self, frames: torch.Tensor, streams: Sequence[StreamState]) -> list[torch.Tensor]:
        return list(frames)

    def accept(self, stream: LatentStream, output: torch.Tensor) -> FrameUpdate:
        stream.outputs.append(output)
        stream.num_frames += 1
        return FrameUpdate(frames=output[None], finished=stream.num_frames == stream.prompt.num_frames)


def prompt(i: int) -> SpeechPrompt:
    frames = 10 + 3 * i
    gen = torch.Generator().manual_seed(i)
    return SpeechPrompt(
        token_ids=torch.randint(0, 64, (5 + 4 * i,), generator=gen).tolist(),
        conditioning=torch.randn(frames, COND, generator=gen),
        num_frames=frames,
        cache_salt=f"cond-{i}",
    )


def run(num_blocks: int, family: SpeechFamily | None = None) -> tuple[dict, dict, int]:
    config = engine_config("unused", num_blocks=num_blocks, max_num_seqs=8, max_num_batched_tokens=16,
                           capacity=CapacityConfig())  # production's admission and chunking, on a StepClock
    core = core_on_step_clock(config, family or ToyLatentFamily())
    streams = {}
    for i in range(6):
        core.add_request(f"s{i}", prompt(i), SamplingParams())
        streams[f"s{i}"] = started(core, f"s{i}").stream
    chunks = drain(core)
    assert core.kv_manager.num_free_blocks == num_blocks
    audio = {rid: np.concatenate([c.pcm for c in got]) for rid, got in chunks.items()}
    reasons = {rid: got[-1].finish_reason for rid, got in chunks.items()}
    preemptions = sum(got[-1].metrics.num_preemptions for got in chunks.values())
    return {rid: torch.stack(s.outputs) for rid, s in streams.items()}, audio | {"reasons": reasons}, preemptions


def test_continuous_frames_flow_through_the_engine_and_end_by_themselves():
    frames, audio, _ = run(num_blocks=64)
    for i in range(6):
        rid = f"s{i}"
        assert frames[rid].shape == (10 + 3 * i, LATENT)
        assert audio["reasons"][rid] == "stop"
        assert len(audio[rid]) == (10 + 3 * i) * ToyLatentCodec.samples_per_frame


def test_continuous_family_survives_preemption_unchanged():
    roomy, roomy_audio, none = run(num_blocks=64)
    tight, tight_audio, some = run(num_blocks=4)
    assert none == 0 and some > 0
    for rid in roomy:
        torch.testing.assert_close(tight[rid], roomy[rid], atol=1e-5, rtol=1e-5)
        np.testing.assert_allclose(tight_audio[rid], roomy_audio[rid], atol=1e-5)
