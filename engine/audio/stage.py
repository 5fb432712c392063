"""The audio stage the engine core talks to: each request's frames in, its PCM chunks out."""
from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from typing import Hashable

import numpy as np
import torch
from torch import Tensor

from capacity.config import CapacityConfig
from capacity.listener import Listener
from engine.audio.config import StreamingConfig
from engine.audio.decoder import PendingAudio, StreamChunk, StreamingDecoder
from engine.audio.primers import CodecPrimers
from engine.audio.runners import CodecRunner, codec_graph_batch_sizes, runner_for
from engine.audio.state_graphs import capture_state_graphs
from engine.gpu_config import GpuConfig
from memory.state_slots import StateSlotPool
from model.codecs.base import FrameCodec, SlottedDecoder

# Feed lengths (frames a stream) whose incremental steps replay CUDA graphs: a frame a step while
# a listener is close to running dry, two or four when a step was skipped or a first chunk's
# frames are fed at once. A whole piece (INCREMENTAL_PIECE_FRAMES) goes to a listener far ahead,
# whose slack covers an eager step; its graph would reserve activations of 64 frames a stream.
STEP_GRAPH_LENGTHS = [1, 2, 4]


class AudioStage:
    """With a runner, the audio launched at step N (`launch_next`, after the step's requests are
    updated) is collected at step N+1 (`step`), after that step's forward was queued, so the two
    run side by side; without one, each step decodes and collects its own windows (the CPU path)
    and `launch_next` does nothing; with a codec thread (CPU), `decode_beside` starts decoding the
    frames of the steps before on that thread as the step's forward begins, and `step` collects
    it, before the step's own frames are pushed (nothing else touches the decoder meanwhile);
    a first chunk ready in the step still decodes in it (`with_first_chunks`). Either way every
    stream gets the same audio in the same order; with a runner, or after its first chunk with
    a codec thread, it leaves one step later. Streams are sized and ordered by their listeners,
    which the stage only reads."""

    def __init__(self, decoder: StreamingDecoder, runner: CodecRunner | None, codec_thread: bool = False,
                 primers: CodecPrimers | None = None) -> None:
        self.decoder = decoder
        self.runner = runner
        # The states streams with a codec prefix start from (a decoder with state slots only).
        self.primers = primers
        self._pending: PendingAudio | None = None
        self._thread = ThreadPoolExecutor(1, "chorus-codec") if codec_thread and runner is None else None
        self._beside: Future | None = None

    @classmethod
    def build(cls, codec: FrameCodec, config: StreamingConfig, capacity: CapacityConfig, gpu: GpuConfig,
              device: torch.device, max_num_seqs: int, state_slots: int | None = None,
              primer_bytes: int = 0) -> AudioStage:
        """The stage for `codec`, cutting windows as `config` (already resolved against the codec's
        window hints) says, on a side stream of `device` where `gpu` allows it, else in the step,
        incrementally where the codec can and `config` lets it; a decoder with fixed-size states
        decodes from them on any device, in the step, keeps them in a pool of `state_slots`
        streams (default twice max_num_seqs), and keeps the states of codec prefixes within
        `primer_bytes` (engine/audio/primers.py)."""
        incremental = codec.incremental if config.incremental else None
        # NOTE: incremental decoding moves each stream's decoder state as it decodes; the side
        # stream's launch-now, collect-next-step overlap would need that state double-buffered.
        # A decoder whose state is a fixed set of tensors (Qwen3-TTS's 12 Hz) keeps it in the pool
        # admission counts and decodes each frame once, so it wins over the overlap on a GPU too;
        # any other incremental decoder gives way to the side stream there.
        runner = None if isinstance(incremental, SlottedDecoder) else runner_for(
            codec, config, gpu, device, max_num_seqs, capacity)
        if runner is not None:
            incremental = None
        pool = primers = None
        if isinstance(incremental, SlottedDecoder):
            pool = StateSlotPool(incremental.state_shapes(), state_slots or 2 * max_num_seqs, device)
            # NOTE: before the graphs: a prefix is hundreds of frames, in calls no graph was captured for.
            primers = CodecPrimers(incremental, primer_bytes, device)
            if device.type == "cuda" and gpu.codec_graphs:
                incremental = capture_state_graphs(incremental, codec.frame_shape, codec.frame_dtype,
                                                   codec_graph_batch_sizes(gpu, max_num_seqs), STEP_GRAPH_LENGTHS, device)
        return cls(StreamingDecoder(codec, config, incremental, capacity, pool), runner, config.codec_thread, primers)

    def open(self, stream_id: Hashable, listener: Listener, codec_prefix: Tensor | None = None) -> None:
        """Opens a stream, its codec in the state `codec_prefix`'s frames leave (the prompt's:
        decoded now unless kept, engine/audio/primers.py), or silent. A stage whose decoder keeps
        no states (incremental decoding off) cannot start a stream anywhere but from silence, and
        raises ValueError for a prefix."""
        primer = None
        if codec_prefix is not None:
            if self.primers is None:
                raise ValueError("this codec prefix needs the codec's incremental decoding, which is off")
            self.decoder.codec.check_frames(codec_prefix, leading_dims=1)
            primer = self.primers.primer(codec_prefix.to(self.decoder.codec.frame_dtype))
        self.decoder.open(stream_id, listener, primer)

    def push(self, stream_id: Hashable, frames: Tensor) -> None:
        self.decoder.push(stream_id, frames)

    def finish(self, stream_id: Hashable) -> None:
        self.decoder.finish(stream_id)

    def discard(self, stream_id: Hashable) -> None:
        self.decoder.discard(stream_id)

    def drain(self, stream_id: Hashable) -> None:
        self.decoder.drain(stream_id)

    def is_draining(self, stream_id: Hashable) -> bool:
        return self.decoder.is_draining(stream_id)

    def seconds_until_free_slot(self) -> float:
        return self.decoder.seconds_until_free_slot()

    @property
    def free_state_slots(self) -> int | None:
        """Streams that could open now for want of codec state (None: the codec keeps none)."""
        pool = self.decoder.state_pool
        return None if pool is None else pool.num_free

    def pending_seconds(self, stream_id: Hashable) -> float:
        """Audio of the stream whose frames exist but that has not left yet."""
        return self.decoder.pending_seconds(stream_id)

    @property
    def decodes_beside(self) -> bool:
        """Whether decoding runs on the codec thread beside the forward (`decode_beside`)."""
        return self._thread is not None

    def decode_beside(self, now: float) -> None:
        """With a codec thread: starts decoding what is ready at `now` on it; the step's `step`
        waits for it. The caller touches nothing of the stage until then."""
        if self._thread is not None:
            self._beside = self._thread.submit(self.decoder.decode_ready, now)

    def with_first_chunks(self, ready: dict[Hashable, StreamChunk], now: float) -> dict[Hashable, StreamChunk]:
        """With a codec thread: `ready` (what it decoded) and, when a stream's first chunk became
        ready in this step, that chunk (and any other stream's first), decoded now, in the step:
        a first audio never waits a step, and the others' audio stays for the thread. A stream
        in both gets one chunk, the two joined in order."""
        if self._thread is None or not self.decoder.first_chunk_ready(now):
            return ready
        joined = dict(ready)
        for stream_id, later in self.decoder.decode_first_chunks(now).items():
            earlier = joined.get(stream_id)
            joined[stream_id] = later if earlier is None else StreamChunk(
                np.concatenate([earlier.pcm, later.pcm]), later.is_last, earlier.frame_start, later.frame_end)
        return joined

    def step(self, now: float) -> dict[Hashable, StreamChunk]:
        """The chunks ready at `now` (the engine clock's), at most one per stream (with a codec
        thread: those `decode_beside` decoded)."""
        if self._beside is not None:
            beside, self._beside = self._beside, None
            return beside.result()
        if self.runner is None:
            return self.decoder.decode_ready(now)
        ready = self.decoder.collect(self._pending) if self._pending is not None else {}
        self._pending = None
        return ready

    def launch_next(self, now: float) -> None:
        """With a runner: starts decoding the windows due at `now`, to be collected next step."""
        if self.runner is not None:
            self._pending = self.decoder.launch(self.runner, now=now)

    def take_failures(self) -> dict[Hashable, Exception]:
        """Streams whose audio failed to decode since the last call; they are already closed."""
        return self.decoder.take_failures()
