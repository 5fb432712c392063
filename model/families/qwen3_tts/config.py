"""A Qwen3-TTS checkpoint's configuration: config.json (talker, code predictor, speaker encoder,
special ids) and generation_config.json, read once into validated dataclasses.

Vocabulary used throughout the family:
- text track: per position, a text token's embedding through `text_projection` (or nothing);
- codec track: per position, a codec embedding: a talker codec id (tags, pad, bos, a named
  speaker), an x-vector (clone), or a whole frame of `num_code_groups` codes (in-context clone
  and every decoded frame: code 0 through the talker's table, code k through the code
  predictor's table k - 1, summed);
- frame: the `num_code_groups` codes of one 12.5 Hz step; code 0 comes from the talker's head,
  codes 1.. from the code predictor (the "depth" of the frame).
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from model.families.base import AUTO_LANGUAGE

MODEL_TYPES = ("custom_voice", "voice_design", "base")
# Where a download keeps its 12 Hz codec (speech tokenizer), inside the checkpoint folder.
CODEC_FOLDER = "speech_tokenizer"
# The reference never lets the talker stop before its second frame (its min_new_tokens).
MIN_FRAMES = 2


@dataclass(frozen=True, slots=True)
class DecoderShape:
    """A Qwen3-style decoder stack (RMSNorm on each head's queries and keys, SwiGLU MLP, RoPE)."""

    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rope_theta: float
    rms_norm_eps: float

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DecoderShape:
        if d.get("use_sliding_window"):
            raise ValueError("a sliding-window Qwen3-TTS decoder is not supported")
        if d.get("attention_bias"):
            raise ValueError("Qwen3-TTS decoders with attention bias are not supported")
        if d.get("hidden_act", "silu") != "silu":
            raise ValueError(f"unsupported hidden_act {d['hidden_act']!r} (only 'silu')")
        heads = int(d["num_attention_heads"])
        return cls(
            hidden_size=int(d["hidden_size"]),
            intermediate_size=int(d["intermediate_size"]),
            num_layers=int(d["num_hidden_layers"]),
            num_heads=heads,
            num_kv_heads=int(d.get("num_key_value_heads") or heads),
            head_dim=int(d.get("head_dim") or int(d["hidden_size"]) // heads),
            rope_theta=float(d.get("rope_theta", 10000.0)),
            rms_norm_eps=float(d.get("rms_norm_eps", 1e-6)),
        )

    def as_llama_dict(self, vocab_size: int, max_positions: int) -> dict[str, Any]:
        """The same shape in Hugging Face Llama keys (model/llama reads those)."""
        return {
            "vocab_size": vocab_size, "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size, "num_hidden_layers": self.num_layers,
            "num_attention_heads": self.num_heads, "num_key_value_heads": self.num_kv_heads,
            "head_dim": self.head_dim, "max_position_embeddings": max_positions,
            "rope_theta": self.rope_theta, "rms_norm_eps": self.rms_norm_eps, "tie_word_embeddings": False,
        }


@dataclass(frozen=True, slots=True)
class CodecIds:
    """The talker's special codec ids (its codec vocabulary holds the codebook, then these)."""

    eos: int
    pad: int
    bos: int
    think: int
    nothink: int
    think_bos: int
    think_eos: int


@dataclass(frozen=True, slots=True)
class TextIds:
    """Special ids of the text vocabulary."""

    im_start: int
    im_end: int
    tts_pad: int
    tts_bos: int
    tts_eos: int


@dataclass(frozen=True, slots=True)
class SamplingDefaults:
    """generation_config.json: the talker's (code 0) and the sub-talker's (codes 1..) sampling."""

    do_sample: bool = True
    top_k: int = 50
    top_p: float = 1.0
    temperature: float = 0.9
    repetition_penalty: float = 1.05
    subtalker_dosample: bool = True
    subtalker_top_k: int = 50
    subtalker_top_p: float = 1.0
    subtalker_temperature: float = 0.9
    max_new_tokens: int = 2048

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SamplingDefaults:
        names = cls.__dataclass_fields__
        return cls(**{k: type(getattr(cls(), k))(v) for k, v in d.items() if k in names})


@dataclass(frozen=True, slots=True)
class Qwen3TtsConfig:
    """One checkpoint's facts. Invariants: every special codec id is inside the talker's codec
    vocabulary, every speaker and language id too, and `num_code_groups` >= 2."""

    model_type: str
    talker: DecoderShape
    predictor: DecoderShape
    talker_vocab_size: int
    predictor_vocab_size: int
    text_vocab_size: int
    text_hidden_size: int
    num_code_groups: int
    max_positions: int
    codec: CodecIds
    text: TextIds
    speakers: dict[str, int]
    speaker_dialects: dict[str, str | bool]
    languages: dict[str, int]
    sampling: SamplingDefaults = field(default_factory=SamplingDefaults)
    speaker_encoder: dict[str, Any] = field(default_factory=dict)
    # The speakers as config.json spells them (`speakers` is keyed in lower case, as the
    # reference matches them), and the checkpoint's `tts_model_size` ("0b6", "1b7"), if given.
    speaker_names: tuple[str, ...] = ()
    model_size: str | None = None

    def __post_init__(self) -> None:
        if self.model_type not in MODEL_TYPES:
            raise ValueError(f"unsupported tts_model_type {self.model_type!r} (known: {', '.join(MODEL_TYPES)})")
        if self.num_code_groups < 2:
            raise ValueError(f"num_code_groups must be >= 2, got {self.num_code_groups}")
        ids = {**asdict(self.codec), **{f"speaker {k}": v for k, v in self.speakers.items()},
               **{f"language {k}": v for k, v in self.languages.items()}}
        for name, value in ids.items():
            if not 0 <= value < self.talker_vocab_size:
                raise ValueError(f"codec id {name}={value} is outside the talker vocabulary ({self.talker_vocab_size})")

    @property
    def suppressed_codes(self) -> range:
        """Code-0 ids the talker never samples: the top 1,024 of its vocabulary (the special ids),
        except end of speech, which `SamplingDefaults`' caller allows after two frames."""
        return range(max(0, self.talker_vocab_size - 1024), self.talker_vocab_size)

    @property
    def public_languages(self) -> tuple[str, ...]:
        """The languages a request may name: auto, then the checkpoint's, dialects excluded
        (a dialect is reached through its speaker)."""
        return (AUTO_LANGUAGE, *(name for name in self.languages if "dialect" not in name))

    @classmethod
    def from_dicts(cls, config: dict[str, Any], generation: dict[str, Any] | None = None) -> Qwen3TtsConfig:
        talker = config["talker_config"]
        predictor = talker["code_predictor_config"]
        return cls(
            model_type=str(config.get("tts_model_type") or "custom_voice"),
            talker=DecoderShape.from_dict(talker),
            predictor=DecoderShape.from_dict(predictor),
            talker_vocab_size=int(talker["vocab_size"]),
            predictor_vocab_size=int(predictor["vocab_size"]),
            text_vocab_size=int(talker["text_vocab_size"]),
            text_hidden_size=int(talker["text_hidden_size"]),
            num_code_groups=int(talker["num_code_groups"]),
            max_positions=int(talker.get("max_position_embeddings", 32768)),
            codec=CodecIds(
                eos=int(talker["codec_eos_token_id"]), pad=int(talker["codec_pad_id"]),
                bos=int(talker["codec_bos_id"]), think=int(talker["codec_think_id"]),
                nothink=int(talker["codec_nothink_id"]), think_bos=int(talker["codec_think_bos_id"]),
                think_eos=int(talker["codec_think_eos_id"]),
            ),
            text=TextIds(
                im_start=int(config["im_start_token_id"]), im_end=int(config["im_end_token_id"]),
                tts_pad=int(config["tts_pad_token_id"]), tts_bos=int(config["tts_bos_token_id"]),
                tts_eos=int(config["tts_eos_token_id"]),
            ),
            speakers={k.lower(): int(v) for k, v in (talker.get("spk_id") or {}).items()},
            speaker_dialects={k.lower(): v for k, v in (talker.get("spk_is_dialect") or {}).items()},
            languages={k.lower(): int(v) for k, v in (talker.get("codec_language_id") or {}).items()},
            sampling=SamplingDefaults.from_dict(generation or {}),
            speaker_encoder=dict(config.get("speaker_encoder_config") or {}),
            speaker_names=tuple(talker.get("spk_id") or ()),
            model_size=config.get("tts_model_size"),
        )

    @classmethod
    def load(cls, folder: Path) -> Qwen3TtsConfig:
        generation = folder / "generation_config.json"
        return cls.from_dicts(
            json.loads((folder / "config.json").read_text()),
            json.loads(generation.read_text()) if generation.is_file() else None,
        )


def is_qwen3_tts(config: dict[str, Any]) -> bool:
    """Whether a config.json describes a Qwen3-TTS checkpoint (its model_type says so)."""
    return config.get("model_type") == "qwen3_tts"
