"""The Orpheus family at run time: token embeddings in, sampled audio tokens out, SNAC frames."""
from __future__ import annotations

from typing import Sequence

import torch

from model.codecs.base import FrameCodec
from model.families.base import FrameUpdate, SpeechFamily, SpeechPrompt, StreamState
from model.families.orpheus.graph_emit import OrpheusGraphEmitter
from model.families.orpheus.layout import FRAME_TOKENS, OrpheusTokenLayout
from model.families.orpheus.stream import OrpheusStream
from model.llama.model import LlamaModel
from model.sampling import Sampler, SamplingParams


class OrpheusFamily(SpeechFamily):
    """A Llama decoder whose outputs are SNAC audio tokens, 7 per 2048-sample frame.

    With `constrain_audio_tokens` the sampler only sees the tokens that are valid at the stream's
    next frame position (plus end_of_speech), so a random or undertrained model cannot emit
    invalid codes; without it, invalid tokens are dropped by the frame assembler.
    """

    name = "orpheus"
    backbone: LlamaModel

    def __init__(
        self,
        backbone: LlamaModel,
        codec: FrameCodec,
        layout: OrpheusTokenLayout,
        max_model_len: int,
        constrain_audio_tokens: bool = True,
    ) -> None:
        self.backbone = backbone
        self.codec = codec
        self.layout = layout
        self._max_model_len = max_model_len
        self.constrain_audio_tokens = constrain_audio_tokens
        self.sampler = Sampler()
        self._device = next(backbone.parameters()).device
        self._stop_ids = (layout.end_of_speech,)
        self._graph_emitter: OrpheusGraphEmitter | None = None

    @property
    def max_model_len(self) -> int:
        return self._max_model_len

    @property
    def outputs_per_second(self) -> float:
        return FRAME_TOKENS * super().outputs_per_second

    def new_stream(self, prompt: SpeechPrompt, params: SamplingParams) -> OrpheusStream:
        return OrpheusStream(prompt, params, self.layout, self._device)

    def embed(self, spans: Sequence[tuple[StreamState, int, int]]) -> torch.Tensor:
        ids = [tok for stream, start, end in spans for tok in stream.token_ids[start:end]]
        return self.backbone.embed_tokens(torch.tensor(ids, dtype=torch.long, device=self._device))

    def head(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.backbone.compute_logits(hidden)

    def emit(self, logits: torch.Tensor, streams: Sequence[OrpheusStream]) -> list[int]:
        candidates = None
        if self.constrain_audio_tokens:
            positions = torch.tensor([s.frames.position for s in streams], device=logits.device)
            candidates = self.layout.frame_candidates(logits, positions)
        states = [s.sampling for s in streams]
        tokens = self.sampler(logits, states, self._stop_ids, candidates)
        if self._graph_emitter is not None:
            # Tokens sampled outside the graph join the graph sampler's penalty bitmap too.
            self._graph_emitter.sampler.seen.mark(states, tokens)
        return tokens.tolist()

    def graph_emitter(self, max_rows: int) -> OrpheusGraphEmitter:
        self._graph_emitter = OrpheusGraphEmitter(self.backbone, self.layout, self.constrain_audio_tokens, max_rows)
        return self._graph_emitter

    def release(self, stream: OrpheusStream) -> None:
        if self._graph_emitter is not None:
            self._graph_emitter.sampler.seen.release(stream.sampling)

    def accept(self, stream: OrpheusStream, output: int) -> FrameUpdate:
        stream.token_ids.append(output)
        stream.sampling.append(output)
        if output in self._stop_ids:
            return FrameUpdate(finished=True)
        frame = stream.frames.push(output)
        if frame is None:
            return FrameUpdate()
        stream.num_frames += 1
        return FrameUpdate(frames=torch.tensor([frame], dtype=torch.long))
