"""joe's iSTFT decoder in int8 for the CPU: its incremental ONNX graph quantized statically (onnxruntime's
QDQ form: per-channel int8 weights, uint8 activations with ranges calibrated on the teacher's own
latents), which onnxruntime runs with VNNI integer convolutions.

Every convolution is quantized but the head's last two: the projection to the spectrum (log-
magnitude and phase) and the iSTFT's synthesis basis, which turns it into samples. Measured on
the decoder's own calls over 12 sentences (log-spectral distance to the float decoder's audio,
median over frames): everything quantized 17.2 dB (the basis alone spreads its error over every
bin), all but the basis 3.3 dB, all but these two 2.7 dB, at 0.40 and 0.45 of the float graph's
time. How close the int8 decoder stays to the float one is tested
(tests/model/families/joe/test_quantized_codec.py) and measured in the server.

The graph is made once per voice and head, next to the float one, from the float graph and a
few sentences of the teacher's latents: a few seconds on the 2-core machine. Only the incremental
graph is quantized: it decodes all but each stream's first chunk, which stays a float window.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import numpy as np
import onnx

from model.families.joe.teacher import LATENT_CUT, Teacher, TeacherScales, onnx_session, write_aside

# Texts whose latents calibrate the activation ranges: statements, questions, numbers said as
# words, a long sentence; what the decoder meets in service. Fixed, so the graph is reproducible.
CALIBRATION_TEXTS = (
    "The quick brown fox jumps over the lazy dog.",
    "Is this the last question of the day, or is there one more?",
    "Your appointment is on March fourteenth at two thirty in the afternoon.",
    "Thank you for calling; an agent will be with you in just a moment.",
    "She sells seashells by the seashore, and the shells she sells are surely seashells.",
    "Wow! That was loud.",
)
# The incremental graph is calibrated on pieces of this many frames, each with the float graph's
# states before it (what it meets in service: pieces of 1 to a few dozen frames).
CALIBRATION_PIECE_FRAMES = 8


def calibration_latents(phoneme_ids: list[list[int]]) -> list[np.ndarray]:
    """The teacher's latents z [192, T] of each utterance (its phoneme ids), as the student learns them."""
    teacher = Teacher(LATENT_CUT)
    return [np.ascontiguousarray(teacher.run(ids, TeacherScales()).latent.T, dtype=np.float32) for ids in phoneme_ids]


def incremental_feeds(float_graph: Path, latents: list[np.ndarray]) -> list[dict[str, np.ndarray]]:
    """The incremental graph's calibration inputs: each latent fed in pieces, every piece with the
    states the float graph left after the pieces before it."""
    session = onnx_session(float_graph)
    inputs = session.get_inputs()
    state_inputs = [i for i in inputs if i.name.startswith("state_")]
    feeds = []
    for z in latents:
        states = {i.name: np.zeros([1, *i.shape[1:]], np.float32) for i in state_inputs}
        frames = z.shape[1]
        for start in range(0, frames, CALIBRATION_PIECE_FRAMES):
            piece = z[None, :, start:start + CALIBRATION_PIECE_FRAMES]
            feed = {"z": np.ascontiguousarray(piece), "frames_before": np.array([start], np.int64),
                    "totals": np.array([frames], np.int64), **states}
            feeds.append(feed)
            _, *new = session.run(None, feed)
            states = dict(zip((i.name for i in state_inputs), new))
    return feeds


def quantize_graph(float_graph: Path, target: Path, feeds: list[dict[str, np.ndarray]]) -> Path:
    """Writes the int8 form of `float_graph` to `target` (atomically), its activation ranges from
    running `feeds`; the last two convolutions stay float (see the module's docstring)."""
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
        convs = [node.name for node in onnx.load(prepared).graph.node if node.op_type == "Conv"]
        try:
            quantize_static(prepared, staging, Feeds(), quant_format=QuantFormat.QDQ, per_channel=True,
                            op_types_to_quantize=["Conv"], nodes_to_exclude=convs[-2:],
                            activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
        finally:
            Path(prepared).unlink(missing_ok=True)

    return write_aside(target, write)
