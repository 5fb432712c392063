"""The audio path every baseline shares with the engine: tokens → frames → windowed SNAC decode.

Baselines sample with plain transformers (no audio-token constraint), so a sampled id is mapped
onto the audio token of the frame position it lands on (`code = id mod codebook`): every token
becomes one valid code, exactly as the engine's constrained sampler guarantees, and all systems
decode the same number of frames with the same codec and StreamingConfig.
"""
from __future__ import annotations

import time
from typing import Hashable

import torch

from benchmarks.trace import RequestTrace
from capacity.listener import Listener
from engine.audio.config import StreamingConfig
from engine.audio.decoder import StreamingDecoder
from model.codecs.base import FrameCodec
from model.families.orpheus.frames import FrameAssembler
from model.families.orpheus.layout import OrpheusTokenLayout


class StreamingAudio:
    """Open streams' assemblers and one decoder shared by all of them (windows batched across
    streams, as the engine does). Invariant: a stream's trace receives its chunks in order, each
    stamped when `flush` returned it, and its listener has received them (as the engine's request
    table keeps it: the decoder sizes chunks by it); a stream closes after its budget of tokens."""

    def __init__(self, codec: FrameCodec, layout: OrpheusTokenLayout, config: StreamingConfig) -> None:
        self.layout = layout
        self.decoder = StreamingDecoder(codec, config)
        self._assemblers: dict[Hashable, FrameAssembler] = {}
        self._remaining: dict[Hashable, int] = {}
        self._traces: dict[Hashable, RequestTrace] = {}
        self._listeners: dict[Hashable, Listener] = {}

    def open(self, stream_id: Hashable, trace: RequestTrace, max_tokens: int) -> None:
        self._assemblers[stream_id] = FrameAssembler(self.layout)
        self._remaining[stream_id] = max_tokens
        self._traces[stream_id] = trace
        self._listeners[stream_id] = Listener(self.decoder.codec.sample_rate)
        self.decoder.open(stream_id, self._listeners[stream_id])

    def discard(self, stream_id: Hashable) -> None:
        for table in (self._assemblers, self._remaining, self._traces, self._listeners):
            table.pop(stream_id, None)
        self.decoder.discard(stream_id)

    def is_open(self, stream_id: Hashable) -> bool:
        return stream_id in self._remaining and self._remaining[stream_id] > 0

    def push(self, stream_id: Hashable, token_ids: list[int]) -> None:
        """Tokens past the stream's budget are ignored (a static batch runs to its longest member)."""
        assembler = self._assemblers[stream_id]
        take = token_ids[: max(0, self._remaining[stream_id])]
        self._remaining[stream_id] -= len(take)
        frames = []
        for token in take:
            position = assembler.position
            code = token % self.layout.codebook_size
            frame = assembler.push(self.layout.audio_offset + position * self.layout.codebook_size + code)
            if frame is not None:
                frames.append(frame)
        if frames:
            self.decoder.push(stream_id, torch.tensor(frames, dtype=torch.long))
        if self._remaining[stream_id] == 0:
            self.decoder.finish(stream_id)

    def flush(self) -> None:
        """Decodes every ready window and records the chunks' arrival now."""
        chunks = self.decoder.decode_ready(time.monotonic())
        now = time.monotonic()
        for stream_id, chunk in chunks.items():
            self._traces[stream_id].record(now, len(chunk.pcm))
            self._listeners[stream_id].received(len(chunk.pcm), now)
            if chunk.is_last:
                del self._assemblers[stream_id], self._remaining[stream_id], self._traces[stream_id]
                del self._listeners[stream_id]
