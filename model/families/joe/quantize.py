"""joe's iSTFT decoder in int8 for the CPU: its incremental ONNX graph quantized statically
(onnxruntime's QDQ form: per-channel int8 weights, uint8 activations with ranges calibrated on the
teacher's own latents), which onnxruntime runs with VNNI integer convolutions.

Which convolutions stay float is the recipe's (`Int8Recipe.float_convs`, indices into
`CONV_ROLES`). The projection to the spectrum and the iSTFT's synthesis basis always do: with the
basis quantized the log-spectral distance to the float decoder was 17.2 dB (its error spreads over
every bin), with both float 2.7 dB. The served recipe also keeps the head's first convolution
float: per layer (benchmarks/int8_layers.py, the table in model/families/joe/README.md) no
convolution moved WER beyond the gate's noise, but that one alone makes two thirds of the
spectral error, and keeping it float costs a tenth of the float graph's time.

The graph is made once per voice, head and recipe, next to the float one, from the float graph
and the teacher's latents of the recipe's calibration sentences (`weights/int8_calibration.txt`:
48 sentences of the training corpus's training part, written out; seconds on the 2-core machine).
Only the incremental graph is quantized: windows decode through it too (codec.IncrementalWholeCodec).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np
import onnx

from model.families.joe.teacher import LATENT_CUT, Teacher, TeacherScales, onnx_session, write_aside

CALIBRATION_FILE = Path(__file__).parent / "weights" / "int8_calibration.txt"
# The incremental graph's convolutions in its order (torch's export names them /Conv, /Conv_1, …):
# the HiFi-GAN trunk (conv_pre, the x8 upsampling, its three resblocks of two convolutions each),
# then the head (conv_in, its resblock, conv_out) and the iSTFT's fixed synthesis basis.
CONV_ROLES = ("trunk conv_pre k7", "trunk upsample x8", "trunk resblock k3 d1", "trunk resblock k3 d2",
              "trunk resblock k5 d2", "trunk resblock k5 d6", "trunk resblock k7 d3", "trunk resblock k7 d12",
              "head conv_in k7", "head resblock k3 d1", "head resblock k3 d3", "head conv_out k7 (spectrum)",
              "iSTFT basis")
ALWAYS_FLOAT = (11, 12)
# What the served graph keeps float: the above and the head's conv_in (see the module's docstring).
SERVED_FLOAT = (8, 11, 12)


def conv_name(index: int) -> str:
    """The node name of CONV_ROLES[index] in the graph, as torch's export numbers them."""
    return "/Conv" if index == 0 else f"/Conv_{index}"


def calibration_texts() -> tuple[str, ...]:
    return tuple(line.strip() for line in CALIBRATION_FILE.read_text().splitlines() if line.strip())


@dataclass(frozen=True, slots=True)
class Int8Recipe:
    """How the int8 graph is made. Invariant: `key` changes with anything that changes the graph
    (the convolutions kept float, the calibration sentences and how they are cut), so a graph
    cached under one recipe is never served for another."""

    float_convs: tuple[int, ...]
    calibration: tuple[str, ...]
    # The incremental graph is calibrated on pieces of this many frames, each with the float
    # graph's states before it (what it meets in service: pieces of 1 to a few dozen frames).
    piece_frames: int = 8

    def __post_init__(self) -> None:
        if not set(ALWAYS_FLOAT) <= set(self.float_convs) <= set(range(len(CONV_ROLES))):
            raise ValueError(f"float_convs must include {ALWAYS_FLOAT} and index CONV_ROLES, got {self.float_convs}")
        if not self.calibration or self.piece_frames < 1:
            raise ValueError("need calibration sentences and piece_frames >= 1")

    @property
    def key(self) -> str:
        text = repr((sorted(self.float_convs), self.calibration, self.piece_frames))
        return hashlib.sha256(text.encode()).hexdigest()[:12]


def default_recipe() -> Int8Recipe:
    """What load_joe_codec's `int8` runner serves with."""
    return Int8Recipe(float_convs=SERVED_FLOAT, calibration=calibration_texts())


def calibration_latents(phoneme_ids: list[list[int]]) -> list[np.ndarray]:
    """The teacher's latents z [192, T] of each utterance (its phoneme ids), as the student learns them."""
    teacher = Teacher(LATENT_CUT)
    return [np.ascontiguousarray(teacher.run(ids, TeacherScales()).latent.T, dtype=np.float32) for ids in phoneme_ids]


def incremental_feeds(float_graph: Path, latents: list[np.ndarray], piece_frames: int) -> list[dict[str, np.ndarray]]:
    """The incremental graph's calibration inputs: each latent fed in pieces, every piece with the
    states the float graph left after the pieces before it."""
    session = onnx_session(float_graph)
    inputs = session.get_inputs()
    state_inputs = [i for i in inputs if i.name.startswith("state_")]
    feeds = []
    for z in latents:
        states = {i.name: np.zeros([1, *i.shape[1:]], np.float32) for i in state_inputs}
        frames = z.shape[1]
        for start in range(0, frames, piece_frames):
            piece = z[None, :, start:start + piece_frames]
            feed = {"z": np.ascontiguousarray(piece), "frames_before": np.array([start], np.int64),
                    "totals": np.array([frames], np.int64), **states}
            feeds.append(feed)
            _, *new = session.run(None, feed)
            states = dict(zip((i.name for i in state_inputs), new))
    return feeds


def quantize_graph(float_graph: Path, target: Path, feeds: list[dict[str, np.ndarray]],
                   float_convs: tuple[int, ...]) -> Path:
    """Writes the int8 form of `float_graph` to `target` (atomically), its activation ranges from
    running `feeds`, the convolutions `float_convs` (indices into CONV_ROLES) left float."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    class Feeds(CalibrationDataReader):
        def __init__(self) -> None:
            self._feeds: Iterator[dict] = iter(feeds)

        def get_next(self) -> dict | None:
            return next(self._feeds, None)

    def write(staging: str) -> None:
        prepared = staging + ".prepared.onnx"
        quant_pre_process(str(float_graph), prepared, skip_symbolic_shape=True)
        names = {node.name for node in onnx.load(prepared).graph.node if node.op_type == "Conv"}
        if names != set(map(conv_name, range(len(CONV_ROLES)))):
            raise ValueError(f"{float_graph} does not have the convolutions of CONV_ROLES: {sorted(names)}")
        try:
            quantize_static(prepared, staging, Feeds(), quant_format=QuantFormat.QDQ, per_channel=True,
                            op_types_to_quantize=["Conv"], nodes_to_exclude=[conv_name(i) for i in float_convs],
                            activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
        finally:
            Path(prepared).unlink(missing_ok=True)

    return write_aside(target, write)


def calibration_feeds(float_graph: Path, recipe: Int8Recipe) -> list[dict[str, np.ndarray]]:
    """The incremental graph's calibration inputs from the teacher's latents of the recipe's sentences."""
    from model.families.joe.frontend import Phonemizer

    phonemizer = Phonemizer()
    latents = calibration_latents([ids for text in recipe.calibration for ids in phonemizer.sentence_ids(text)])
    return incremental_feeds(float_graph, latents, recipe.piece_frames)


def make_int8_graph(float_graph: Path, target: Path, recipe: Int8Recipe) -> Path:
    """`target`, the int8 form of `float_graph` by `recipe`."""
    return quantize_graph(float_graph, target, calibration_feeds(float_graph, recipe), recipe.float_convs)
