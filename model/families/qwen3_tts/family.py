"""The Qwen3-TTS family at run time: two-track inputs in, one 16-code frame out per step (code 0
from the talker's head, codes 1.. from the depth stage), 12 Hz codec frames to the audio stage."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch
from torch import Tensor

from model.codecs.base import FrameCodec
from model.families.base import FrameUpdate, SpeechFamily, SpeechPrompt, StreamState
from model.families.qwen3_tts.config import Qwen3TtsConfig
from model.families.qwen3_tts.depth import CodePredictor
from model.families.qwen3_tts.graph_emit import Qwen3GraphEmitter
from model.families.qwen3_tts.prompt import NO_TEXT, SPEAKER_VECTOR, Qwen3Prompt
from model.families.qwen3_tts.stream import Qwen3Stream
from model.families.qwen3_tts.talker import TextProjection
from model.llama.model import LlamaModel
from model.sampling import Sampler, SamplingParams


@dataclass(slots=True)
class TalkerOutput:
    """What `head` hands to `emit`: the emitting rows' final hidden states [B, H] (the depth
    stage's input) and their code-0 logits [B, V]."""

    hidden: Tensor
    logits: Tensor


class Qwen3Family(SpeechFamily):
    """Talker (backbone + text track), code predictor and 12 Hz codec of one checkpoint.

    Input of a prompt position: text track + codec track (prompt.py); of decode position
    prompt_len + k: the sum of frame k's code embeddings (code 0 from the talker's table, code j
    from the predictor's table j - 1) plus the text the talker reads then. The talker never
    samples the special codec ids (the top of its vocabulary) except end of speech, which stops
    the stream without a frame, and which a live stream cannot sample before its last text."""

    name = "qwen3_tts"
    backbone: LlamaModel

    def __init__(self, config: Qwen3TtsConfig, backbone: LlamaModel, text: TextProjection,
                 predictor: CodePredictor, codec: FrameCodec, max_model_len: int) -> None:
        self.config = config
        self.backbone = backbone
        self.text = text
        self.predictor = predictor
        self.codec = codec
        self._max_model_len = max_model_len
        self.sampler = Sampler()
        self._device = backbone.device
        self._stop_ids = (config.codec.eos,)
        # Code 0 is drawn among the ids the reference does not suppress (the codebook and end of
        # speech): the warpers then sort those few instead of the whole talker vocabulary.
        suppressed = torch.zeros(config.talker_vocab_size, dtype=torch.bool)
        suppressed[list(config.suppressed_codes)] = True
        suppressed[config.codec.eos] = False
        self._code_0_ids = (~suppressed).nonzero()[:, 0].to(self._device)
        self._graph_emitter: Qwen3GraphEmitter | None = None
        self._tts_pad = config.text.tts_pad
        self._pad_track = pad_text_track(config, text, backbone.dtype)

    @property
    def max_model_len(self) -> int:
        return self._max_model_len

    def new_stream(self, prompt: SpeechPrompt, params: SamplingParams) -> Qwen3Stream:
        if not isinstance(prompt, Qwen3Prompt):
            raise TypeError("a Qwen3-TTS stream needs a Qwen3Prompt (model/families/qwen3_tts/frontend.py)")
        return Qwen3Stream(prompt, params, self.config.sampling, self.config.num_code_groups,
                           self.config.text.tts_pad, self._device)

    def reserve(self, max_rows: int) -> None:
        self.predictor.reserve(max_rows)

    def embed(self, spans: Sequence[tuple[StreamState, int, int]]) -> Tensor:
        text_ids: list[int] = []
        single: list[int] = []  # a row of the talker's codec table, or -1
        frames: list[Sequence[int]] = []  # each row's codes (G)
        frame_rows: list[int] = []
        vectors: list[Tensor] = []
        vector_rows: list[int] = []
        for stream, start, end in spans:
            assert isinstance(stream, Qwen3Stream)
            prompt = stream.qwen3_prompt
            prompt_len = stream.prompt_len
            for position in range(start, end):
                row = len(text_ids)
                if position < prompt_len:
                    text_ids.append(prompt.text_ids[position])
                    entry = prompt.codec[position]
                    if entry == (SPEAKER_VECTOR,):
                        vectors.append(prompt.speaker_vector)
                        vector_rows.append(row)
                        single.append(-1)
                    elif len(entry) > 1:
                        frames.append(entry)
                        frame_rows.append(row)
                        single.append(-1)
                    else:
                        single.append(entry[0] if entry else -1)
                else:
                    frame = position - prompt_len
                    text_ids.append(stream.trailing_id(frame))
                    frames.append(stream.frame_codes(frame))
                    frame_rows.append(row)
                    single.append(-1)
        return self._inputs(text_ids, single, frames, frame_rows, vectors, vector_rows)

    def _inputs(self, text_ids: list[int], single: list[int], frames: list[Sequence[int]], frame_rows: list[int],
                vectors: list[Tensor], vector_rows: list[int]) -> Tensor:
        device, dtype = self._device, self.backbone.dtype
        rows = len(text_ids)
        # NOTE: a decode step's rows all read text and a frame: the sums then start from the text
        # track and add the frames in place (what adding into zeros at every row computes, in
        # fewer calls than the index adds a prompt's mixed rows need). Once a whole text is in the
        # prompt, every decode row reads tts_pad, whose track is a constant (see pad_text_track).
        if text_ids.count(self._tts_pad) == rows:
            out = self._pad_track.repeat(rows, 1)
        elif NO_TEXT not in text_ids:
            out = self.text(torch.tensor(text_ids, device=device)).to(dtype)
        else:
            text = torch.tensor(text_ids, device=device)
            out = torch.zeros(rows, self.backbone.hidden_size, dtype=dtype, device=device)
            has_text = (text != NO_TEXT).nonzero()[:, 0]
            if len(has_text):
                out.index_add_(0, has_text, self.text(text[has_text]).to(dtype))
        if max(single, default=-1) >= 0:
            codes = torch.tensor(single, device=device)
            has_code = (codes >= 0).nonzero()[:, 0]
            out.index_add_(0, has_code, self.backbone.embed_tokens(codes[has_code]))
        if frames:
            # NOTE: one array from the rows' lists: a decode step's sixteen rows as tensors would be
            # a select each and a stack.
            stacked = torch.from_numpy(np.array(frames, dtype=np.int64)).to(device)
            # The frame's input is the sum of its codes' embeddings: code 0 from the talker's table,
            # the rest from the predictor's.
            embedded = torch.cat((self.backbone.embed_tokens(stacked[:, :1]), self.predictor.embed_codes(stacked[:, 1:])),
                                 dim=1).sum(dim=1).to(dtype)
            if len(frame_rows) == rows:  # every row (rows are in order)
                out.add_(embedded)
            else:
                out.index_add_(0, torch.tensor(frame_rows, device=device), embedded)
        if vectors:
            out.index_add_(0, torch.tensor(vector_rows, device=device), torch.stack(vectors).to(device, dtype))
        return out

    def head(self, hidden: Tensor) -> TalkerOutput:
        return TalkerOutput(hidden, self.backbone.compute_logits(hidden))

    def emit(self, head_out: TalkerOutput, streams: Sequence[Qwen3Stream]) -> list[list[int]]:
        logits = head_out.logits
        # A live stream whose text has not ended may not end either: the model would stop at the
        # end of what it has read, and the rest of the text would have no stream to go to.
        unfinished = [row for row, stream in enumerate(streams) if not stream.text_complete]
        if unfinished:
            logits = logits.clone()
            logits[unfinished, self.config.codec.eos] = float("-inf")
        candidates = self._code_0_ids.expand(len(streams), -1)
        states = [s.sampling for s in streams]
        first = self.sampler(logits, states, self._stop_ids, candidates)
        if self._graph_emitter is not None:
            # Codes 0 drawn outside the graph join the graph sampler's penalty bitmap too.
            self._graph_emitter.sampler.seen.mark(states, first)
        rest = self.predictor.predict(head_out.hidden, self.backbone.embed_tokens(first),
                                      [s.depth_sampling for s in streams])
        # NOTE: joined as lists: the engine reads them on the host anyway, and a concatenation
        # of the two tensors first is two more dispatches a step.
        return [[code] + codes for code, codes in zip(first.tolist(), rest.tolist())]

    def graph_emitter(self, max_rows: int) -> Qwen3GraphEmitter:
        self._graph_emitter = Qwen3GraphEmitter(self.backbone, self.predictor, self._code_0_ids, self.config.codec.eos,
                                                self.config.sampling.subtalker_top_k, max_rows)
        return self._graph_emitter

    def release(self, stream: Qwen3Stream) -> None:
        if self._graph_emitter is not None:
            self._graph_emitter.sampler.seen.release(stream.sampling)

    def extend_text(self, stream: Qwen3Stream, text_ids: Sequence[int], final: bool) -> None:
        stream.extend_text(list(text_ids), final, self.config.text.tts_eos)

    def needs_input(self, stream: Qwen3Stream) -> bool:
        return stream.needs_text

    def can_fill_input(self, stream: Qwen3Stream) -> bool:
        return stream.can_fill

    def fill_input(self, stream: Qwen3Stream) -> None:
        stream.fill()

    def accept(self, stream: Qwen3Stream, output: list[int]) -> FrameUpdate:
        stream.sampling.append(output[0])
        if output[0] in self._stop_ids:
            return FrameUpdate(finished=True)
        return FrameUpdate(frames=stream.append_frame(output))


def pad_text_track(config: Qwen3TtsConfig, text: TextProjection, dtype: torch.dtype) -> Tensor:
    """The text track of tts_pad [1, H]: what every decode position reads once its text has been
    read (a whole text's prompt holds all of it, so every decode position does). Projected once, as
    the reference's generate projects it (tts_bos, tts_eos and tts_pad in one call, keeping the
    pad's row), rather than through the text MLP at every step."""
    ids = config.text
    with torch.no_grad():
        specials = torch.tensor([ids.tts_bos, ids.tts_eos, ids.tts_pad], device=text.embedding.weight.device)
        return text(specials)[2:].to(dtype)
