"""The joe student: a small causal Llama that regresses the teacher's latent z, a few frames per step.

Sequence of one utterance with P phoneme ids and T frames, r = frames_per_step, S = ceil(T / r):

    position   0 … P-1            P          P+1        …  P+S-1
    input      phoneme embedding  step 0     step 1        step S-1
    output     (none)             z[0:r]     z[r:2r]       z[(S-1)r:T]   (last group trimmed)

A step's input is a projection of the prior window around its frames (frames jr - before …
jr + r - 1 + after, zero past either end) plus a prenet of the previous step's output (zeros for
step 0). The phoneme prefix is ordinary prompt tokens: it is prefilled into the KV cache and gives
every step attention over the whole sentence. The prior and z are standardized per channel with
statistics of the training data kept as buffers, so the weights file is self-contained.
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from torch import Tensor, nn

from model.attention import AttentionBackend, get_attention_backend
from model.llama.config import LlamaArchConfig
from model.llama.model import LlamaModel

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
FAMILY = "joe"
# The shipped weights (see weights/manifest.json for how they were trained).
SHIPPED_WEIGHTS = Path(__file__).parent / "weights"


@dataclass(frozen=True, slots=True)
class StudentConfig:
    """Shape of the student. Invariant: every field is positive except the window margins (>= 0)."""

    latent_channels: int = 192
    frames_per_step: int = 2
    prior_before: int = 2
    prior_after: int = 8
    phoneme_vocab: int = 256
    hidden_size: int = 256
    intermediate_size: int = 768
    num_layers: int = 4
    num_heads: int = 4
    num_kv_heads: int = 2
    prenet_size: int = 256
    prenet_dropout: float = 0.5
    max_positions: int = 4096

    def __post_init__(self) -> None:
        if self.prior_before < 0 or self.prior_after < 0:
            raise ValueError("prior window margins must be >= 0")
        if min(self.latent_channels, self.frames_per_step, self.hidden_size, self.num_layers) < 1:
            raise ValueError("sizes must be positive")

    @property
    def window_frames(self) -> int:
        return self.prior_before + self.frames_per_step + self.prior_after

    @property
    def step_channels(self) -> int:
        return self.frames_per_step * self.latent_channels

    def num_steps(self, num_frames: int) -> int:
        return math.ceil(num_frames / self.frames_per_step)

    def llama_arch(self) -> LlamaArchConfig:
        return LlamaArchConfig.from_hf_dict(dict(
            vocab_size=self.phoneme_vocab, hidden_size=self.hidden_size,
            intermediate_size=self.intermediate_size, num_hidden_layers=self.num_layers,
            num_attention_heads=self.num_heads, num_key_value_heads=self.num_kv_heads,
            max_position_embeddings=self.max_positions, rms_norm_eps=1e-5, tie_word_embeddings=True,
        ))


def read_config(folder: Path) -> StudentConfig:
    values = json.loads((folder / CONFIG_FILE).read_text())
    if values.pop("chorus", {}).get("family") != FAMILY:
        raise ValueError(f"{folder / CONFIG_FILE} is not a {FAMILY} student")
    return StudentConfig(**values)


class JoeStudent(nn.Module):
    """Backbone (our paged-KV Llama) plus the frame-level input and output layers.

    Invariant: `step_inputs` and `head` work in standardized units; `denormalize` maps the head's
    output back to the teacher's z, the codec's frames.
    """

    def __init__(self, config: StudentConfig, attention: AttentionBackend | None = None) -> None:
        super().__init__()
        self.config = config
        self.backbone = LlamaModel(config.llama_arch(), attention or get_attention_backend("torch"))
        channels = config.latent_channels
        self.prior_proj = nn.Linear(config.window_frames * channels, config.hidden_size)
        self.prenet = nn.Sequential(
            nn.Linear(config.step_channels, config.prenet_size), nn.ReLU(), nn.Dropout(config.prenet_dropout),
            nn.Linear(config.prenet_size, config.prenet_size), nn.ReLU(), nn.Dropout(config.prenet_dropout),
            nn.Linear(config.prenet_size, config.hidden_size),
        )
        self.head_proj = nn.Linear(config.hidden_size, config.step_channels)
        for name in ("prior_mean", "latent_mean"):
            self.register_buffer(name, torch.zeros(channels))
        for name in ("prior_std", "latent_std"):
            self.register_buffer(name, torch.ones(channels))

    def prior_windows(self, prior: Tensor) -> Tensor:
        """[T, C] teacher prior → [S, window_frames * C] standardized step windows."""
        cfg = self.config
        prior = (prior.to(self.prior_mean) - self.prior_mean) / self.prior_std
        steps = cfg.num_steps(prior.shape[0])
        tail = steps * cfg.frames_per_step - prior.shape[0] + cfg.prior_after
        padded = F.pad(prior, (0, 0, cfg.prior_before, tail))
        windows = padded.unfold(0, cfg.window_frames, cfg.frames_per_step)  # [S, C, W]
        return windows.transpose(1, 2).reshape(steps, -1)

    def prior_inputs(self, prior: Tensor) -> Tensor:
        """[T, C] teacher prior → [S, hidden]: the prior's share of every step's input."""
        return self.prior_proj(self.prior_windows(prior).to(self.prior_proj.weight.dtype))

    def step_inputs(self, prior_inputs: Tensor, previous: Tensor) -> Tensor:
        """Inputs of steps whose prior share is `prior_inputs` [N, hidden] and whose previous
        step emitted `previous` [N, r * C] (standardized; zeros before step 0)."""
        return prior_inputs + self.prenet(previous.to(prior_inputs.dtype))

    def head(self, hidden: Tensor) -> Tensor:
        return self.head_proj(hidden)

    def denormalize(self, steps: Tensor) -> Tensor:
        """[N, r * C] standardized step outputs → [N * r, C] latent frames."""
        frames = steps.float().reshape(-1, self.config.latent_channels)
        return frames * self.latent_std + self.latent_mean

    def normalize_latent(self, latent: Tensor) -> Tensor:
        return (latent.to(self.latent_mean) - self.latent_mean) / self.latent_std

    def save(self, folder: Path, dtype: torch.dtype = torch.float16) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        # The family registry (model/registry.py) finds the family under chorus.family.
        config = {"chorus": {"family": FAMILY}, **asdict(self.config)}
        (folder / CONFIG_FILE).write_text(json.dumps(config, indent=2) + "\n")
        # NOTE: statistics stay float32: they are tiny and fp16 would shift every frame.
        state = {k: (v if "mean" in k or "std" in k else v.to(dtype)).cpu().contiguous()
                 for k, v in self.state_dict().items()}
        save_file(state, str(folder / WEIGHTS_FILE))

    @classmethod
    def load(cls, folder: Path, attention: AttentionBackend | None = None,
             device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32) -> JoeStudent:
        student = cls(read_config(folder), attention)
        state = load_file(str(folder / WEIGHTS_FILE))
        student.load_state_dict({k: v.float() for k, v in state.items()})
        student = student.to(device=device)
        if dtype != torch.float32:
            # Statistics stay float32 so standardizing is exact; the layers take `dtype`.
            for module in (student.backbone, student.prior_proj, student.prenet, student.head_proj):
                module.to(dtype)
        return student.eval()
