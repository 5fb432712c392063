"""The joe voice's frames (columns of the teacher latent z) → PCM.

Two decoders. The teacher's HiFi-GAN is the reference, with two runners: our PyTorch port and the
voice's own decoder sub-graph through onnxruntime (on the 2-core machine 1.5-2.3x faster than the
port under torch's oneDNN convolutions; both equal each other to ~2e-6, tests/model/families/joe/test_codec.py).
What the engine serves with by default is the iSTFT decoder distilled from it
(model/families/joe/istft.py): the HiFi-GAN's first stage plus a small iSTFT head, about 4x fewer
multiply-adds per frame; the engine's CPU path runs it incrementally (istft_stream.py), each frame
decoded once, and decodes only streams' first chunks as windows.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from model.codecs.base import FrameCodec, WindowHints, lag_frames
from model.families.joe.hifigan import HifiGanConfig, HifiGanDecoder
from model.families.joe.istft import (HEAD_WEIGHTS_FILE, ONNX_INPUT, ONNX_OUTPUT, IstftDecoder, export_onnx,
                                    load_decoder, onnx_path)
from model.families.joe.istft_stream import (IncrementalIstft, OnnxIncrementalDecoder, TorchIncrementalDecoder,
                                           export_incremental_onnx)
from model.families.joe.teacher import AUDIO, DECODER_CUT, LATENT, cut_path, decoder_state_dict, onnx_session, voice_key


class JoeFrameCodec(FrameCodec):
    """A frame is one column of z (192 float32); frame i decodes to samples [i * hop, (i + 1) *
    hop) because every upsampling layer is centred on its input. Subclasses run the decoder."""

    frame_dtype = torch.float32
    # How joe's frames are best streamed. Measured (tests/model/families/joe/test_codec.py): one z column
    # moves the decoder's output from ~9.9 frames before it to ~9.7 frames after it (changes
    # > 1e-5; > 1e-3 only within -6.6..+8.2 frames). With 10 frames of context each side a
    # streamed window equals the whole-utterance decode (max error ~2e-6), so seams need no
    # crossfade. Every window pays its 20 frames of context and about 1.5 ms of fixed cost, so
    # chunks grow from 8 frames (the first audio) to 128 (1.5 s: 1.16x the decoding of the audio
    # alone; 64 cost 1.31x and, over 10 sentences, 9 % more codec time). While chunks grow, a
    # listener holds little more than the chunk being made takes to generate, so under load it
    # can run dry just before one: within 0.12 s of that (about two steps at 16 streams) what is
    # ready leaves at once, in multiples of 8 frames. At 16 closed-loop HTTP streams that made
    # 100 % of admitted streams viable at a 200 ms client buffer instead of 90 % (and at 0 ms
    # 73 % instead of 40 %; benchmarks/serving.py, 2026-12-01). A wider margin costs more than it
    # saves: at 0.3 s most growing streams were urgent, each 8-frame window decodes 28 frames, and
    # 16 in-process streams made 18 audio s per s instead of 36.
    window_hints = WindowHints(
        first_chunk_frames=8,
        chunk_frames=128,
        grow_chunks=True,
        urgent_slack_seconds=0.12,
        left_context_frames=10,
        lookahead_frames=10,
        # The first audio waits for its lookahead to be generated: 8 frames make it 16 = two of
        # the student's 8-frame steps instead of three, and cost a seam error of at most 1.8e-3
        # (median 7e-4; 6 frames: 1.1e-2) where the first chunk meets the second, over 15 eval
        # sentences with the served decoder (audio peak ~0.33).
        first_lookahead_frames=8,
        crossfade_samples=0,
    )

    def __init__(self, config: HifiGanConfig) -> None:
        self.frame_shape = (config.latent_channels,)
        self.samples_per_frame = config.hop_length
        self.sample_rate = config.sample_rate

    def check_frames(self, frames: Tensor, leading_dims: int) -> None:
        super().check_frames(frames, leading_dims)
        if frames.is_floating_point() and not bool(torch.isfinite(frames).all()):
            raise ValueError("latent frames must be finite")


class TorchFrameCodec(JoeFrameCodec):
    """Decodes with a PyTorch decoder (the HiFi-GAN port or the iSTFT decoder), on its device."""

    def __init__(self, decoder: HifiGanDecoder | IstftDecoder, config: HifiGanConfig) -> None:
        super().__init__(config)
        self.decoder = decoder.eval()
        self.device = next(decoder.parameters()).device

    def decode(self, frames: Tensor) -> Tensor:
        self.check_frames(frames, leading_dims=2)
        return self.decode_trusted(frames)

    def decode_trusted(self, frames: Tensor) -> Tensor:
        with torch.inference_mode():
            z = frames.to(device=self.device, dtype=torch.float32).transpose(1, 2)
            return self.decoder(z).float()


class OnnxFrameCodec(JoeFrameCodec):
    """Decodes with an ONNX graph of a decoder (z [B, 192, n] → audio) in onnxruntime (CPU)."""

    def __init__(self, path: Path, input_name: str, output_name: str, threads: int) -> None:
        super().__init__(HifiGanConfig())
        self.session = onnx_session(path, threads)
        self.input_name, self.output_name = input_name, output_name

    def decode(self, frames: Tensor) -> Tensor:
        self.check_frames(frames, leading_dims=2)
        z = np.ascontiguousarray(frames.detach().to("cpu", torch.float32).transpose(1, 2).numpy())
        (audio,) = self.session.run([self.output_name], {self.input_name: z})
        return torch.from_numpy(audio.reshape(z.shape[0], -1))


class IncrementalWholeCodec(JoeFrameCodec):
    """Decodes whole utterances (the engine's windows: streams' first chunks) through an
    incremental decoder from a fresh state, flushed past their end: the same graph as every later
    chunk of a stream, so a stream's audio does not depend on how it was cut. The int8 decoder
    needs it: a whole graph quantized apart would have ranges of its own."""

    def __init__(self, incremental: OnnxIncrementalDecoder, config: HifiGanConfig) -> None:
        super().__init__(config)
        self.incremental = incremental

    def decode(self, frames: Tensor) -> Tensor:
        self.check_frames(frames, leading_dims=2)
        batch, count = frames.shape[:2]
        delay, spf = self.incremental.delay_samples, self.samples_per_frame
        # Whole frames of zeros that flush the decoder past the end.
        padded = torch.cat([frames, frames.new_zeros(batch, lag_frames(self.incremental, spf), *frames.shape[2:])], dim=1)
        audio, _ = self.incremental.decode(padded, [self.incremental.initial_state() for _ in range(batch)],
                                           [0] * batch, [count] * batch)
        return audio[:, delay : delay + count * spf]


SHIPPED_DECODER = Path(__file__).parent / "weights"
# The incremental graph's cache name: bump its version whenever istft_stream.py or
# model/codecs/streaming_conv.py changes what the graph computes (the cache is keyed by weights).
INCREMENTAL_GRAPH = "istft-incremental-v2"
# The int8 incremental graph's cache name: the float graph's, the quantization method's version
# (bump it when quantize.py changes how a recipe is applied) and the recipe's key.
INT8_INCREMENTAL_GRAPH = INCREMENTAL_GRAPH + "-int8-v2"
DECODERS = ("istft", "hifigan")
# `int8`: onnxruntime on graphs quantized to int8 (model/families/joe/quantize.py), CPU and iSTFT only.
RUNNERS = ("torch", "onnxruntime", "int8")
CODEC_CHOICES = DECODERS + tuple(f"{d}-{r}" for d in DECODERS for r in RUNNERS)


def load_joe_codec(device: torch.device | str = "cpu", codec: str = "istft",
                   folder: Path = SHIPPED_DECODER, int8_graph: Path | None = None) -> JoeFrameCodec:
    """`istft` (the default) is the distilled decoder whose head lies in `folder`, `hifigan` the
    teacher's. Either runs through onnxruntime on the CPU (faster there; the iSTFT decoder's graph
    is exported from our module once), the iSTFT decoder's streaming graph quantized to int8
    (`int8`, made once, model/families/joe/quantize.py), and through PyTorch on a GPU; a `-torch`,
    `-onnxruntime` (float) or `-int8` suffix forces one. Every HiFi-GAN weight comes from the
    installed voice package. `int8_graph`: an int8 incremental graph to serve instead of the
    default recipe's (benchmarks/int8_layers.py measures variants so)."""
    device = torch.device(device)
    if codec not in CODEC_CHOICES:
        raise ValueError(f"the joe codec must be one of {', '.join(CODEC_CHOICES)}, got {codec!r}")
    decoder, _, runner = codec.partition("-")
    # NOTE: on the CPU the iSTFT decoder runs in int8 unless a runner is named: faster, and within
    # a point of the float decoder's WER on the intelligibility gate, its interval included
    # (benchmarks/intelligibility_gate.py; figures in model/families/joe/README.md).
    runner = runner or ("torch" if device.type != "cpu" else "int8" if decoder == "istft" else "onnxruntime")
    if runner in ("onnxruntime", "int8") and device.type != "cpu":
        raise ValueError("the onnxruntime codecs run on the CPU only")
    if runner == "int8" and decoder != "istft":
        raise ValueError("only the iSTFT decoder has an int8 form (istft-int8)")
    threads = torch.get_num_threads()
    if decoder == "hifigan" and runner == "onnxruntime":
        return OnnxFrameCodec(cut_path(DECODER_CUT), LATENT, AUDIO, threads)
    if decoder == "hifigan":
        teacher = HifiGanDecoder.from_state_dict(decoder_state_dict())
        return TorchFrameCodec(teacher.to(device), teacher.config)
    if not (folder / HEAD_WEIGHTS_FILE).is_file():
        raise FileNotFoundError(f"no iSTFT decoder head in {folder}: train one with "
                                "python -m training.joe.train_decoder")
    teacher = HifiGanDecoder.from_state_dict(decoder_state_dict())
    istft = load_decoder(teacher, folder).to(device)
    incremental = IncrementalIstft(istft)
    if runner in ("onnxruntime", "int8"):
        path, stream_path = onnx_path(folder, voice_key()), onnx_path(folder, voice_key(), INCREMENTAL_GRAPH)
        if runner == "onnxruntime" and not path.is_file():
            export_onnx(istft, path)
        if not stream_path.is_file():
            export_incremental_onnx(incremental, stream_path)
        if runner == "int8":
            # NOTE: one int8 graph for windows and streams alike (IncrementalWholeCodec).
            graph = int8_graph or _int8_incremental_graph(folder, stream_path)
            streaming = OnnxIncrementalDecoder(incremental, graph, threads)
            codec = IncrementalWholeCodec(streaming, teacher.config)
        else:
            codec = OnnxFrameCodec(path, ONNX_INPUT, ONNX_OUTPUT, threads)
            streaming = OnnxIncrementalDecoder(incremental, stream_path, threads)
        codec.incremental = streaming
    else:
        codec = TorchFrameCodec(istft, teacher.config)
        codec.incremental = TorchIncrementalDecoder(incremental)
    return codec


def _int8_incremental_graph(folder: Path, float_graph: Path) -> Path:
    """The int8 form of the incremental float graph by quantize.default_recipe() (made once)."""
    from model.families.joe.quantize import default_recipe, make_int8_graph

    recipe = default_recipe()
    target = onnx_path(folder, voice_key(), f"{INT8_INCREMENTAL_GRAPH}-{recipe.key}")
    return target if target.is_file() else make_int8_graph(float_graph, target, recipe)
