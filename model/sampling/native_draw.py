"""The sub-step draw as one C call on the CPU (model/native/candidate_draw.c).

`SubStepSampler`'s torch draw (model/sampling/candidates.py) is a dozen ops on a [B, K] batch:
on the CPU each costs a dispatch of a few microseconds and `topk` twenty on fresh data, so a
16-row draw over 64 codes took 61 us, fifteen times a frame, for a few hundred nanoseconds of
arithmetic. The kernel does the same draw (top-k candidates, temperature, each row's top-k and
top-p, Gumbel-max pick, greedy rows' argmax) in one pass per row. It draws the torch path's tokens
from the same logits and noise, but for what its C file says (float ties; top-p cut-offs within a
few ulp of a cumulative probability), and is used only where it is built (build.py) and the
logits are on the CPU.
"""
from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from functools import cache

import torch
from torch import Tensor

from model.native.build import load
from model.sampling.candidates import CandidateWarper


# Up to here the kernel's sort (K * K comparisons, vectorised) beats torch's: 256 candidates are
# 65,536 comparisons a row, a few microseconds.
MAX_CANDIDATES = 256


class _Plan(ctypes.Structure):
    """chorus_draw_plan of candidate_draw.c, field for field."""

    _fields_ = [
        ("rows", ctypes.c_int64), ("vocab", ctypes.c_int64), ("candidates", ctypes.c_int64),
        ("temperature", ctypes.c_void_p), ("top_k", ctypes.c_void_p), ("top_p_cutoff", ctypes.c_void_p),
        ("greedy", ctypes.c_void_p),
        ("keys", ctypes.c_void_p), ("sorted", ctypes.c_void_p), ("ranks", ctypes.c_void_p),
        ("values", ctypes.c_void_p), ("ids", ctypes.c_void_p), ("scores", ctypes.c_void_p), ("exps", ctypes.c_void_p),
    ]


@cache
def _kernel() -> Callable[..., int] | None:
    """The kernel's entry point with its C signature, or None where it is not built."""
    library = load("candidate_draw")
    if library is None:
        return None
    draw = library.chorus_candidate_draw
    draw.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64,
                     ctypes.c_void_p]
    draw.restype = ctypes.c_int
    return draw


class NativeCandidateDraw:
    """The draws of one `CandidateWarper`'s rows, frame after frame. Invariant: every address in
    the plan is that of a tensor this object holds (the warper's columns, its own flags and
    workspace, the frame's noise), so none dangles while it lives; a draw writes only its
    workspace and the tokens it returns."""

    def __init__(self, warper: CandidateWarper, greedy: Sequence[bool], vocab_size: int) -> None:
        kernel = _kernel()
        if kernel is None:
            raise RuntimeError("the candidate_draw kernel is not built (model/native/build.py)")
        self._call = kernel
        rows, k = len(greedy), warper.candidates
        self.rows, self.vocab_size = rows, vocab_size
        self._greedy = torch.tensor(greedy, dtype=torch.uint8) if any(greedy) else None
        # The plan's workspace, in its order: keys [V], sorted keys [K], ranks, values, ids,
        # scores and exps [K].
        self._workspace = (torch.empty(vocab_size, dtype=torch.int64), torch.empty(k, dtype=torch.int64),
                           torch.empty(k, dtype=torch.int32), torch.empty(k), torch.empty(k, dtype=torch.int64),
                           torch.empty(k), torch.empty(k))
        # Held, contiguous and of the kernel's types: the columns the plan points at.
        self._columns = (_column(warper.temperature, torch.float32), _column(warper.row_top_k, torch.int64),
                         _column(warper.row_top_p_cutoff, torch.float32), self._greedy)
        self._plan = _Plan(rows, vocab_size, k, *(None if c is None else c.data_ptr() for c in self._columns),
                           *(tensor.data_ptr() for tensor in self._workspace))
        self._plan_address = ctypes.addressof(self._plan)
        self._noise: Tensor | None = None
        self._noise_rows: list[int] = []  # each sub-step's address of row 0's noise
        self._noise_stride = 0

    @staticmethod
    def available(device: torch.device, candidates: int) -> bool:
        """Whether the kernel serves K candidates on `device`: built, on the CPU, and K small
        enough for its sort (which counts K * K comparisons: a row that keeps a large vocabulary
        whole is torch's sort's work)."""
        return device.type == "cpu" and candidates <= MAX_CANDIDATES and _kernel() is not None

    def start(self, gumbel: Tensor) -> None:
        """A frame's noise [B, steps, K] (float32, contiguous), held until the next frame's."""
        if gumbel.dim() != 3 or (gumbel.shape[0], gumbel.shape[2]) != (self.rows, self._plan.candidates):
            raise ValueError(f"noise of shape {tuple(gumbel.shape)} for {self.rows} rows of "
                             f"{self._plan.candidates} candidates")
        if not gumbel.is_contiguous() or gumbel.dtype != torch.float32:
            gumbel = gumbel.float().contiguous()
        self._noise = gumbel
        base, step_bytes = gumbel.data_ptr(), gumbel.stride(1) * gumbel.element_size()
        self._noise_rows = [base + step * step_bytes for step in range(gumbel.shape[1])]
        self._noise_stride = gumbel.stride(0)

    def draw(self, logits: Tensor, step: int) -> Tensor:
        """One token per row [B] for sub-step `step` from logits [B, V]."""
        if logits.shape != (self.rows, self.vocab_size):  # the kernel reads what the plan says
            raise ValueError(f"logits of shape {tuple(logits.shape)} for {self.rows} rows of {self.vocab_size}")
        if logits.dtype != torch.float32:
            logits = logits.float()
        if logits.stride(-1) != 1:
            logits = logits.contiguous()
        tokens = torch.empty(self.rows, dtype=torch.int64)
        status = self._call(self._plan_address, logits.data_ptr(), logits.stride(0), self._noise_rows[step],
                            self._noise_stride, tokens.data_ptr())
        if status != 0:
            raise RuntimeError(f"candidate_draw refused its plan ({self._plan.candidates} of {self.vocab_size})")
        return tokens


def _column(column: Tensor | None, dtype: torch.dtype) -> Tensor | None:
    """[B] of `dtype`, contiguous (None stays None)."""
    return None if column is None else column.reshape(-1).to(dtype).contiguous()
