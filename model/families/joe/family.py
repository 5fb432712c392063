"""The joe student as a model family: the engine prefills its phoneme prompt into the paged KV
cache and runs one decode step per group of latent frames, fed back, until the frame count the
prompt announced is reached (so it always ends, and never early)."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import torch
from torch import Tensor

from model.attention import AttentionBackend
from model.families.base import FrameUpdate, SpeechFamily, SpeechPrompt, StreamState
from model.llama.low_precision_linear import use_low_precision_linears
from model.llama.model import LlamaModel
from model.sampling import SamplingParams
from model.families.joe.codec import JoeFrameCodec, load_joe_codec
from model.families.joe.student import JoeStudent

# The last prompt token is not a phoneme: its position is step 0 (see student.py), so the
# prompt's last position already emits frames. Its id only feeds the prefix-cache hash.
STEP_SLOT_ID = 0


class JoeStream(StreamState):
    """Outputs so far (standardized step vectors). Invariant: position prompt_len - 1 + j is
    step j, whose input needs output j - 1; `num_frames` counts frames handed to the codec."""

    def __init__(self, prompt: SpeechPrompt, params: SamplingParams, num_steps: int) -> None:
        super().__init__(prompt, params)
        self.num_steps = num_steps
        self.outputs: list[Tensor] = []
        self.prior_inputs: Tensor | None = None  # [num_steps, hidden], computed at first use

    @property
    def first_step_position(self) -> int:
        return self.prompt_len - 1

    @property
    def max_outputs(self) -> int:
        return self.num_steps


class JoeFamily(SpeechFamily):
    """Serves a JoeStudent with a decoder of the teacher latent (codec.py). Invariant: a stream emits exactly
    prompt.num_frames frames, in num_steps outputs."""

    name = "joe"
    backbone: LlamaModel

    def __init__(self, student: JoeStudent, codec: JoeFrameCodec, max_model_len: int) -> None:
        self.student = student
        self.backbone = student.backbone
        self.codec = codec
        self._max_model_len = max_model_len
        self.device = student.prior_mean.device
        hidden_dtype = student.backbone.embedding.weight.dtype
        self._zeros = torch.zeros(student.config.step_channels, device=self.device, dtype=hidden_dtype)

    @classmethod
    def from_folder(cls, folder: Path, attention: AttentionBackend, device: torch.device,
                    dtype: torch.dtype, max_model_len: int | None = None, codec: str = "istft",
                    bf16_rows: bool = False) -> JoeFamily:
        """`bf16_rows`: on the CPU in float32, products of several rows (a batch of streams, a
        prompt) in bfloat16 (ModelConfig.cpu_batch_precision)."""
        student = JoeStudent.load(folder, attention, device, dtype)
        if device.type == "cpu" and dtype == torch.float32:
            # One stream's decode step reads every weight for one row: float16 copies halve
            # that (low_precision_linear.py). The shipped weights are stored in float16, so the
            # copies are exact; only the row is rounded. Several rows are arithmetic-bound:
            # bfloat16 kernels run them 1.4-1.9x faster where the CPU has them.
            use_low_precision_linears(student, bf16_rows)
        limit = student.config.max_positions
        return cls(student, load_joe_codec(device, codec), min(max_model_len or limit, limit))

    @property
    def max_model_len(self) -> int:
        return self._max_model_len

    @property
    def outputs_per_second(self) -> float:
        return super().outputs_per_second / self.student.config.frames_per_step

    def new_stream(self, prompt: SpeechPrompt, params: SamplingParams) -> JoeStream:
        if prompt.conditioning is None or prompt.num_frames is None:
            raise ValueError("a joe prompt needs its prior (conditioning) and num_frames")
        if prompt.conditioning.shape[0] != prompt.num_frames:
            raise ValueError(f"prior has {prompt.conditioning.shape[0]} frames, prompt says {prompt.num_frames}")
        return JoeStream(prompt, params, self.student.config.num_steps(prompt.num_frames))

    @torch.inference_mode()
    def embed(self, spans: Sequence[tuple[JoeStream, int, int]]) -> Tensor:
        token_ids: list[int] = []
        token_rows: list[int] = []
        step_priors: list[Tensor] = []
        step_previous: list[Tensor] = []
        step_rows: list[int] = []
        row = 0
        for stream, start, end in spans:
            split = min(max(start, stream.first_step_position), end)
            token_ids.extend(stream.prompt.token_ids[start:split])
            token_rows.extend(range(row, row + split - start))
            if end > split:
                first, last = split - stream.first_step_position, end - stream.first_step_position
                step_priors.append(self._prior_inputs(stream)[first:last])
                step_previous.extend(stream.outputs[j - 1] if j else self._zeros for j in range(first, last))
                step_rows.extend(range(row + split - start, row + end - start))
            row += end - start
        # A batch of only steps (every decode step) or only phonemes needs no scatter.
        if not token_ids:
            return self.student.step_inputs(torch.cat(step_priors), torch.stack(step_previous))
        if not step_rows:
            return self.backbone.embed_tokens(torch.tensor(token_ids, device=self.device))
        out = torch.empty(row, self.student.config.hidden_size, device=self.device,
                          dtype=self._zeros.dtype)
        ids = torch.tensor(token_ids, device=self.device)
        out[torch.tensor(token_rows, device=self.device)] = self.backbone.embed_tokens(ids)
        inputs = self.student.step_inputs(torch.cat(step_priors), torch.stack(step_previous))
        out[torch.tensor(step_rows, device=self.device)] = inputs
        return out

    def _prior_inputs(self, stream: JoeStream) -> Tensor:
        if stream.prior_inputs is None:
            stream.prior_inputs = self.student.prior_inputs(stream.prompt.conditioning.to(self.device))
        return stream.prior_inputs

    @torch.inference_mode()
    def head(self, hidden: Tensor) -> Tensor:
        return self.student.head(hidden)

    def emit(self, head_out: Tensor, streams: Sequence[StreamState]) -> list[Tensor]:
        return list(head_out)

    def accept(self, stream: JoeStream, output: Tensor) -> FrameUpdate:
        stream.outputs.append(output)
        remaining = stream.prompt.num_frames - stream.num_frames
        frames = self.student.denormalize(output[None])[:remaining]
        stream.num_frames += frames.shape[0]
        return FrameUpdate(frames=frames, finished=len(stream.outputs) >= stream.num_steps)
