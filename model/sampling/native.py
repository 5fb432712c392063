"""The sampling kernels of model/native/, bound for the CPU, where a batch's draw is a dozen torch
ops on small tensors and each op costs a dispatch of a few microseconds (`topk` twenty on fresh
data) for a few hundred nanoseconds of arithmetic:

- `NativeCandidateDraw` (candidate_draw.c): `SubStepSampler`'s draw over top-k candidates
  (model/sampling/candidates.py), 61 us for 16 rows over 64 codes in torch ops, fifteen times a
  frame.
- `NativeRace` (warped_race.c): `Sampler`'s warpers and exponential race.

Each returns the torch ops' tokens for the same inputs and noise, or None where rounding could
make them differ (its C file says where); the caller then runs the torch ops on the same noise.
So what a seeded request draws never depends on whether a kernel was built.

Each is used only where its kernel is built (model/native/build.py) and the rows are on the CPU.
"""
from __future__ import annotations

import ctypes
from collections.abc import Sequence

import torch
from torch import Tensor

from model.native.build import row_kernel

# Up to here the kernels' sort (K * K comparisons, vectorised) beats torch's: 256 ids are 65,536
# comparisons a row, a few microseconds.
MAX_SORTED = 256


def _candidate_draw():
    return row_kernel("candidate_draw", "chorus_candidate_draw")


def _warped_race():
    return row_kernel("warped_race", "chorus_warped_race")


def build_sampling_kernels() -> bool:
    """Builds (or loads) both kernels now rather than at their first use; whether both are there."""
    return _candidate_draw() is not None and _warped_race() is not None


def _pointer_fields(*names: str) -> list[tuple[str, type]]:
    return [(name, ctypes.c_void_p) for name in names]


# chorus_rows of scores.h, at the head of both plans.
_ROWS = [("rows", ctypes.c_int64), ("vocab", ctypes.c_int64),
         *_pointer_fields("temperature", "top_k", "top_p_cutoff", "greedy")]


class _DrawPlan(ctypes.Structure):
    """chorus_draw_plan of candidate_draw.c, field for field."""

    _fields_ = [*_ROWS, ("candidates", ctypes.c_int64),
                *_pointer_fields("keys", "sorted", "ranks", "values", "ids", "scores", "exps")]


class _RacePlan(ctypes.Structure):
    """chorus_race_plan of warped_race.c, field for field."""

    _fields_ = [*_ROWS, ("max_kept", ctypes.c_int64),
                *_pointer_fields("scaled", "keys", "sorted", "ranks", "ascending", "exps")]


def _column(column: Tensor | None, dtype: torch.dtype) -> Tensor | None:
    """[B] of `dtype`, contiguous, on the CPU (None stays None)."""
    return None if column is None else column.reshape(-1).to("cpu", dtype).contiguous()


def _row_columns(temperature: Tensor, top_k: Tensor, top_p_cutoff: Tensor | None,
                 greedy: Sequence[bool]) -> tuple[Tensor | None, ...]:
    """chorus_rows' four columns, contiguous and of its types (a column left None stays None,
    greedy flags are None when no row is greedy)."""
    flags = torch.tensor(list(greedy), dtype=torch.uint8) if any(greedy) else None
    return (_column(temperature, torch.float32), _column(top_k, torch.int64), _column(top_p_cutoff, torch.float32),
            flags)


def _plan(kind: type[ctypes.Structure], rows: int, vocab_size: int, columns: tuple[Tensor | None, ...], width: int,
          workspace: tuple[Tensor, ...]) -> ctypes.Structure:
    """A plan of `kind` (chorus_rows, then its width, then its workspace) that points at `columns`
    and `workspace`: the caller holds both for as long as it uses the plan."""
    return kind(rows, vocab_size, *(None if c is None else c.data_ptr() for c in columns), width,
                *(tensor.data_ptr() for tensor in workspace))


def _rows_in(scores: Tensor, rows: int, vocab_size: int) -> Tensor:
    """`scores` [rows, vocab_size] as the kernels read them: float32 with unit column stride. The
    shape is checked first: a kernel reads as many floats as its plan says."""
    if scores.shape != (rows, vocab_size):
        raise ValueError(f"scores of shape {tuple(scores.shape)} for {rows} rows of {vocab_size}")
    if scores.dtype != torch.float32:
        scores = scores.float()
    return scores if scores.stride(-1) == 1 else scores.contiguous()


class NativeCandidateDraw:
    """The draws of one list of rows over K candidates, frame after frame. Invariant: every
    address in the plan is that of a tensor this object holds (the rows' columns and flags, its
    workspace, the frame's noise), so none dangles while it lives; a draw writes only its
    workspace and the tokens it returns."""

    def __init__(self, temperature: Tensor, top_k: Tensor, top_p_cutoff: Tensor | None, greedy: Sequence[bool],
                 vocab_size: int, candidates: int) -> None:
        """Per row: temperature (1 for greedy rows), its own top-k (at most K = `candidates`),
        1 - top_p (None when no row uses top-p): a `CandidateWarper`'s row columns."""
        kernel = _candidate_draw()
        if kernel is None:  # callers ask `available` first
            raise RuntimeError("the candidate_draw kernel is not built (model/native/build.py)")
        self._call = kernel
        rows, k = len(greedy), candidates
        self.rows, self.vocab_size = rows, vocab_size
        # The plan's workspace, in its order: keys [V], sorted keys [K], ranks, values, ids,
        # scores and exps [K].
        self._workspace = (torch.empty(vocab_size, dtype=torch.int64), torch.empty(k, dtype=torch.int64),
                           torch.empty(k, dtype=torch.int32), torch.empty(k), torch.empty(k, dtype=torch.int64),
                           torch.empty(k), torch.empty(k))
        self._columns = _row_columns(temperature, top_k, top_p_cutoff, greedy)  # held: the plan points at them
        self._plan = _plan(_DrawPlan, rows, vocab_size, self._columns, k, self._workspace)
        self._plan_address = ctypes.addressof(self._plan)
        self._noise: Tensor | None = None
        self._noise_rows: list[int] = []  # each sub-step's address of row 0's noise
        self._noise_stride = 0

    @staticmethod
    def available(device: torch.device, candidates: int) -> bool:
        """Whether the kernel serves K candidates on `device`: built, on the CPU, and K small
        enough for its sort (which counts K * K comparisons: a row that keeps a large vocabulary
        whole is torch's sort's work)."""
        return device.type == "cpu" and candidates <= MAX_SORTED and _candidate_draw() is not None

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

    def draw(self, logits: Tensor, step: int) -> Tensor | None:
        """One token per row [B] for sub-step `step` from logits [B, V], or None where the kernel
        cannot promise the torch ops' tokens."""
        logits = _rows_in(logits, self.rows, self.vocab_size)
        tokens = torch.empty(self.rows, dtype=torch.int64)
        status = self._call(self._plan_address, logits.data_ptr(), logits.stride(0), self._noise_rows[step],
                            self._noise_stride, tokens.data_ptr())
        if status < 0:
            raise RuntimeError(f"candidate_draw refused its plan ({self._plan.candidates} of {self.vocab_size})")
        return tokens if status == 0 else None


class NativeRace:
    """`Sampler`'s pick for one list of states over one vocabulary: temperature, top-k, top-p,
    softmax and argmax(p / E). Invariant: `race` returns exactly the torch ops' tokens for the same
    scores and noise, or None; every address in its plan is that of a tensor it holds."""

    def __init__(self, temperature: Tensor, top_k: Tensor, top_p_cutoff: Tensor | None, greedy: Sequence[bool],
                 vocab_size: int) -> None:
        """Per row: temperature (1 for greedy rows), top-k (vocab_size where off), 1 - top_p
        (None when no row uses top-p): `warper_columns`' columns."""
        kernel = _warped_race()
        if kernel is None:  # callers ask `available` first
            raise RuntimeError("the warped_race kernel is not built (model/native/build.py)")
        self._call = kernel
        self.rows, self.vocab_size = len(greedy), vocab_size
        kept = MAX_SORTED
        self._columns = _row_columns(temperature, top_k, top_p_cutoff, greedy)  # held: the plan points at them
        # The plan's workspace, in its order: scaled scores, keys [V]; sorted keys, ranks,
        # ascending scores, exps [max_kept].
        self._workspace = (torch.empty(vocab_size), torch.empty(vocab_size, dtype=torch.int64),
                           torch.empty(kept, dtype=torch.int64), torch.empty(kept, dtype=torch.int32),
                           torch.empty(kept), torch.empty(kept))
        self._plan = _plan(_RacePlan, self.rows, vocab_size, self._columns, kept, self._workspace)
        self._plan_address = ctypes.addressof(self._plan)

    @staticmethod
    def available(device: torch.device, top_ks: Sequence[int], vocab_size: int) -> bool:
        """Whether the kernel serves rows of these top-k (the sampling rows'; 0 is off) on
        `device`: built, on the CPU, and each row's kept ids few enough for its sort (a row
        without top-k over a large vocabulary is torch's sort's work)."""
        return (device.type == "cpu" and all(0 < k <= MAX_SORTED or vocab_size <= MAX_SORTED for k in top_ks)
                and _warped_race() is not None)

    def race(self, scores: Tensor, noise: Tensor) -> Tensor | None:
        """One token per row [B] from scores [B, V] and Exp(1) noise [B, V] (contiguous float32,
        as `draw_noise` fills it), or None where the kernel cannot promise torch's."""
        scores = _rows_in(scores, self.rows, self.vocab_size)
        noise = _rows_in(noise, self.rows, self.vocab_size)
        tokens = torch.empty(self.rows, dtype=torch.int64)
        status = self._call(self._plan_address, scores.data_ptr(), scores.stride(0), noise.data_ptr(),
                            noise.stride(0), tokens.data_ptr())
        return tokens if status == 0 else None
