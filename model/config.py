"""Which model to load and how to run it."""
from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

# NOTE: torch is imported where a property needs it, not here: the flags of `chorus serve` take
# their defaults from this module in its supervisor process, which must stay light
# (api/http/supervisor.py).
_DTYPES = ("float32", "bfloat16", "float16")
CPU_BATCH_PRECISIONS = ("auto", "bfloat16", "float32")
# How a Qwen3-TTS tokenizer splits text into words (model/families/qwen3_tts/tokenizer.py).
TEXT_SPLITS = ("auto", "qwen2", "mistral-fix")


@dataclass(slots=True)
class ModelConfig:
    """`model` is a folder (an Orpheus checkpoint: config.json, *.safetensors, tokenizer.json;
    or a joe student) or a built-in name (`joe`, `tiny-random`); `codec` a SNAC folder for
    Orpheus, defaulting to the model folder's `codec/`, and for a joe student the decoder's name
    (`istft` by default, or the teacher's `hifigan`; see model/families/joe/codec.py)."""

    model: str = "joe"
    codec: str | None = None
    device: str = "auto"
    dtype: str = "auto"
    # "auto": the Triton kernels on CUDA when triton is installed, the PyTorch reference otherwise.
    attention_backend: str = "auto"
    # Longest prompt + output a request may use; None = the checkpoint's maximum, capped at 8192.
    max_model_len: int | None = None
    constrain_audio_tokens: bool = True
    # SNAC was trained with a noise block; it is off by default so every window decodes
    # deterministically and streamed audio equals an offline decode.
    codec_noise: bool = False
    # Products of several rows (a batch of streams, a prompt) of a float32 model on the CPU:
    # "bfloat16" through oneDNN's AVX-512 BF16 / AMX kernels, "float32" as the weights are, "auto"
    # bfloat16 where the CPU has those instructions (model/llama/low_precision_linear.py; only
    # the joe student, measured within its quality bounds, honours it so far).
    cpu_batch_precision: str = "auto"
    # Qwen3-TTS: "auto" splits words as the reference does for this checkpoint folder (at inner
    # capitals for the released ones: "i|Phone"), "qwen2" as Qwen2's tokenizer does ("iPhone"),
    # "mistral-fix" at inner capitals whatever the folder.
    text_split: str = "auto"

    def __post_init__(self) -> None:
        if self.text_split not in TEXT_SPLITS:
            raise ValueError(f"text_split must be one of {', '.join(TEXT_SPLITS)}, got {self.text_split!r}")
        if self.cpu_batch_precision not in CPU_BATCH_PRECISIONS:
            raise ValueError(f"cpu_batch_precision must be one of {', '.join(CPU_BATCH_PRECISIONS)}, "
                             f"got {self.cpu_batch_precision!r}")
        if self.device not in ("auto", "cpu") and not self.device.startswith("cuda"):
            raise ValueError(f"device must be 'auto', 'cpu' or 'cuda[:N]', got {self.device!r}")
        if self.dtype != "auto" and self.dtype not in _DTYPES:
            raise ValueError(f"dtype must be 'auto' or one of {sorted(_DTYPES)}, got {self.dtype!r}")
        if self.max_model_len is not None and self.max_model_len < 2:
            raise ValueError(f"max_model_len must be >= 2, got {self.max_model_len}")

    @property
    def torch_device(self) -> torch.device:
        import torch

        if self.device == "auto":
            return torch.device("cuda" if torch.cuda.is_available() else "cpu")
        return torch.device(self.device)

    @property
    def resolved_attention_backend(self) -> str:
        if self.attention_backend != "auto":
            return self.attention_backend
        if self.torch_device.type == "cuda" and importlib.util.find_spec("triton") is not None:
            return "triton"
        return "torch"

    @property
    def bf16_cpu_rows(self) -> bool:
        """Whether a float32 model on the CPU runs its products of several rows in bfloat16."""
        import torch

        if self.torch_device.type != "cpu" or self.torch_dtype != torch.float32:
            return False
        if self.cpu_batch_precision == "auto":
            # NOTE: imported here: model.llama's package loads the whole Llama stack, which a
            # config (read by the API process too) has no need of.
            from model.llama.low_precision_linear import cpu_has_bf16_matmul

            return cpu_has_bf16_matmul()
        return self.cpu_batch_precision == "bfloat16"

    @property
    def torch_dtype(self) -> torch.dtype:
        import torch

        if self.dtype == "auto":
            return torch.bfloat16 if self.torch_device.type == "cuda" else torch.float32
        return getattr(torch, self.dtype)
