"""Seeded tiny Qwen3-TTS-12Hz checkpoints in the real Hugging Face layout, for tests and CPU runs.

`tiny-random-qwen3` (tts_model_type custom_voice: named speakers, two of them dialect speakers) and
`tiny-random-qwen3-base` (base: a speaker encoder for cloning). Each folder holds config.json,
model.safetensors, generation_config.json, a Qwen2-style byte-level BPE (vocab.json, merges.txt,
tokenizer_config.json) and speech_tokenizer/ (the 12 Hz codec: config.json, preprocessor_config.json,
model.safetensors with the decoder and the Mimi encoder, so the tiny codec encodes clips too).
Weights are random, drawn per tensor from a name → shape table derived from the config, so they
produce noise, not speech; the scales are chosen so greedy decoding is varied, a clip's codes
vary, and every module (norm weights, layer scales, ConvNeXt gammas) visibly shapes the output.

Layout choices (ids mirror the real checkpoints' placement, shrunk):
- codec: CODEBOOK codes, then the special ids; the talker vocabulary is CODEBOOK + 1024 because the
  reference suppresses ids [vocab - 1024, vocab) except end of speech, i.e. exactly the specials;
- text: 256 byte tokens + merges (300), then the special tokens, vocabulary padded to TEXT_VOCAB;
  `assistant` and `user` are single tokens, as the reference's prompt slicing assumes;
- codec output: 8 kHz, 640 samples per 12.5 Hz frame (the real one: 24 kHz, 1,920).

The same writer draws a checkpoint at any `Qwen3Shape`: release_shapes.py holds the released models'
sizes, whose random checkpoints measure speed at real size where no download can be had.
"""
from __future__ import annotations

import math
import os
import shutil
import tempfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors.torch import save_file
from tokenizers.models import BPE

from model.families.qwen3_tts.tiny_tokenizer import byte_alphabet, learn_merges, tokens, write_json, write_tokenizer
from model.paths import cache_root

VERSION = "v2"
SEED = 3
NUM_GROUPS = 16
TEXT_VOCAB = 320
TEXT_IDS = dict(im_start_token_id=301, im_end_token_id=302, tts_pad_token_id=303, tts_bos_token_id=304,
                tts_eos_token_id=305)
# Offsets from the codebook size: the real checkpoints place the specials after the codes the same way.
SPECIAL_OFFSETS = dict(codec_pad_id=100, codec_bos_id=101, codec_eos_token_id=102, codec_think_id=106,
                       codec_nothink_id=107, codec_think_bos_id=108, codec_think_eos_id=109)
LANGUAGE_OFFSETS = {"english": 2, "german": 5, "chinese": 7, "japanese": 10, "sichuan_dialect": 14,
                    "beijing_dialect": 26}
SPEAKER_OFFSETS = {"vivian": 953, "ryan": 949, "uncle_fu": 898, "eric": 763, "dylan": 766}
DIALECTS = {"eric": "sichuan_dialect", "dylan": "beijing_dialect"}


def layer_sizes(hidden_size: int, intermediate_size: int, num_hidden_layers: int, num_attention_heads: int,
                num_key_value_heads: int, head_dim: int, max_position_embeddings: int, rope_theta: float,
                **extra) -> dict:
    """One decoder's sizes under their config.json names (`extra`: a talker's text width and RoPE sections)."""
    return dict(hidden_size=hidden_size, intermediate_size=intermediate_size, num_hidden_layers=num_hidden_layers,
                num_attention_heads=num_attention_heads, num_key_value_heads=num_key_value_heads, head_dim=head_dim,
                max_position_embeddings=max_position_embeddings, rope_theta=rope_theta, **extra)


@dataclass(frozen=True, eq=False)
class Qwen3Shape:
    """The sizes one random checkpoint is drawn at. Invariant: only sizes (a codec encoder's among
    them, none for a decode-only codec), dtype, sampling defaults and the size tag vary; the ids
    derive from `codebook` as the real checkpoints lay them out (codes, then the specials; the talker
    vocabulary is codebook + 1024), so every shape loads through the same code as a download."""

    name: str  # the built-in model name (a base checkpoint's adds "-base")
    size_tag: str  # config.json's tts_model_size
    codebook: int
    talker: dict  # `layer_sizes` plus text_hidden_size and mrope_section
    predictor: dict  # `layer_sizes`
    decoder: dict  # the 12 Hz decoder's sizes (codec_config's keys)
    generation: dict
    dtype: torch.dtype = torch.float32
    base_predictor_width: int | None = None  # a base checkpoint's narrower code predictor, if any
    has_base: bool = True  # whether a base (clone) checkpoint can be drawn at this shape
    encoder: dict = field(default_factory=dict)  # the Mimi encoder's sizes (codec_config's keys)

    def __post_init__(self) -> None:
        if self.encoder and self.encoder.get("codebook_size") != self.codebook:
            raise ValueError(f"the codec encoder's codebooks must have the shape's {self.codebook} codes")

    @property
    def talker_vocab(self) -> int:
        return self.codebook + 1024

    @property
    def codec_ids(self) -> dict[str, int]:
        return {name: self.codebook + offset for name, offset in SPECIAL_OFFSETS.items()}

    @property
    def languages(self) -> dict[str, int]:
        return {name: self.codebook + offset for name, offset in LANGUAGE_OFFSETS.items()}

    @property
    def speakers(self) -> dict[str, int]:
        return {name: self.codebook + offset for name, offset in SPEAKER_OFFSETS.items()}


TINY = Qwen3Shape(
    name="tiny-random-qwen3", size_tag="tiny", codebook=64,
    talker=layer_sizes(64, 128, 2, 6, 2, 16, 4096, 10000, text_hidden_size=32, mrope_section=[4, 2, 2]),
    predictor=layer_sizes(64, 96, 2, 4, 2, 16, 64, 10000),
    # A small shape: 8 kHz out (640 samples per 12.5 Hz frame), a 2-layer transformer, narrow convolutions.
    decoder=dict(codebook_dim=16, latent_dim=32, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, head_dim=16, sliding_window=8,
                 upsample_rates=[5, 4, 4, 2], upsampling_ratios=[2, 2], decoder_dim=64),
    generation=dict(do_sample=True, top_k=50, top_p=0.9, temperature=0.9, repetition_penalty=1.05,
                    subtalker_dosample=True, subtalker_top_k=30, subtalker_top_p=0.95,
                    subtalker_temperature=0.9, max_new_tokens=256),
    # The base model's code predictor is narrower than its talker (as in the 1.7B checkpoints), so
    # the two tiny checkpoints cover both the identity and the `small_to_mtp_projection` path.
    base_predictor_width=32,
    # A small Mimi shape: 24 kHz in, 25 Hz after the convolutions (960 samples), 12.5 Hz frames.
    encoder=dict(hidden_size=32, num_filters=4, upsampling_ratios=[8, 6, 5, 4], upsample_groups=32,
                 codebook_size=64, codebook_dim=16, vector_quantization_hidden_dimension=16, num_quantizers=32,
                 num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2, head_dim=16,
                 intermediate_size=64, sliding_window=8, sampling_rate=24000, frame_rate=12.5),
)
# The tiny shape's figures that tests read.
CODEBOOK = TINY.codebook
SPEAKERS = TINY.speakers
GENERATION = TINY.generation
# A text vocabulary just past the 100,000 entries above which the reference re-splits words at inner
# capitals (tokenizer.py): the released checkpoints' is 151,643, the tiny one's 300. Its words that
# become one token each show which split ran (" iPhone" whole, or " i" + "Phone").
LARGE_VOCAB = 100_001
WHOLE_WORDS = (" iPhone", "iPhone", " OpenAI", " YouTube", "YouTube", "Phone", "Tube", "AI", " McDonald", " नमस्ते")


def large_vocabulary(size: int = LARGE_VOCAB) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """The tiny vocabulary and merges, then for each of WHOLE_WORDS the merges that join its tiny
    pieces left to right into one token, then fillers no merge makes (they hold a real space, which
    byte-level pieces never do) up to `size` entries: the same every time it is built."""
    vocab, merges = tokens(), learn_merges()
    tiny, alphabet = BPE(vocab=dict(vocab), merges=list(merges)), byte_alphabet()
    known = set(merges)
    for word in WHOLE_WORDS:
        pieces = [token.value for token in tiny.tokenize("".join(alphabet[b] for b in word.encode()))]
        joined = pieces[0]
        for piece in pieces[1:]:
            if (joined, piece) not in known:
                known.add((joined, piece))
                merges.append((joined, piece))
            joined += piece
            vocab.setdefault(joined, len(vocab))
    vocab.update({f"filler {i}": i for i in range(len(vocab), size)})
    return vocab, merges


def write_large_vocab_tokenizer(folder: Path, size: int = LARGE_VOCAB) -> dict[str, int]:
    """Writes `large_vocabulary(size)` in the released checkpoints' tokenizer layout (vocab.json,
    merges.txt, tokenizer_config.json, the special tokens right after the vocabulary); returns each
    special token's id."""
    return write_tokenizer(folder, *large_vocabulary(size))


def ensure_tiny_qwen3(root: Path | None = None, base: bool = False) -> Path:
    return ensure_random_qwen3(TINY, root, base)


def ensure_random_qwen3(shape: Qwen3Shape, root: Path | None = None, base: bool = False) -> Path:
    """The checkpoint folder, written first if absent: to a temporary sibling renamed into place,
    so concurrent first uses never see half a checkpoint."""
    if base and not shape.has_base:
        raise ValueError(f"{shape.name} has no base (clone) checkpoint")
    folder = (root or cache_root()) / f"{shape.name}{'-base' if base else ''}-{VERSION}"
    done = folder / "speech_tokenizer" / "model.safetensors"
    if done.is_file():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=folder.name + ".", dir=folder.parent))
    try:
        write_random_qwen3(staging, shape, base=base)
        os.replace(staging, folder)
    except OSError:
        if not done.is_file():
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder


def write_random_qwen3(folder: Path, shape: Qwen3Shape = TINY, base: bool = False) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    config = model_config(base, shape)
    write_json(folder / "config.json", config)
    write_json(folder / "generation_config.json", shape.generation)
    specials = write_tokenizer(folder)
    assert specials["<|im_start|>"] == TEXT_IDS["im_start_token_id"], "config.json's text ids name the tokenizer's"
    save_file(random_weights(model_table(config), SEED, shape.dtype), str(folder / "model.safetensors"))
    codec = folder / "speech_tokenizer"
    codec.mkdir()
    codec_cfg = codec_config(shape)
    write_json(codec / "config.json", codec_cfg)
    write_json(codec / "preprocessor_config.json", dict(
        feature_extractor_type="EncodecFeatureExtractor", feature_size=1, padding_side="right",
        padding_value=0.0, return_attention_mask=True, sampling_rate=codec_cfg["input_sample_rate"],
        chunk_length_s=None, overlap=None))
    table = codec_table(codec_cfg["decoder_config"])
    if "encoder_config" in codec_cfg:
        table |= encoder_table(codec_cfg["encoder_config"])
    save_file(random_weights(table, SEED + 1, shape.dtype), str(codec / "model.safetensors"))


def _decoder_keys(part: dict) -> dict:
    """A decoder's sizes, then the settings every shape shares (config.json's key order)."""
    return dict(num_hidden_layers=part["num_hidden_layers"], num_key_value_heads=part["num_key_value_heads"],
                head_dim=part["head_dim"], hidden_act="silu", rms_norm_eps=1e-6, rope_theta=part["rope_theta"],
                attention_bias=False, use_sliding_window=False, sliding_window=None, attention_dropout=0.0,
                num_code_groups=NUM_GROUPS, initializer_range=0.02, use_cache=True, tie_word_embeddings=False)


def model_config(base: bool, shape: Qwen3Shape = TINY) -> dict:
    t, p = shape.talker, shape.predictor
    layers = p["num_hidden_layers"]
    predictor = dict(vocab_size=shape.codebook,
                     hidden_size=shape.base_predictor_width if base and shape.base_predictor_width else p["hidden_size"],
                     intermediate_size=p["intermediate_size"], num_attention_heads=p["num_attention_heads"],
                     max_position_embeddings=p["max_position_embeddings"], rope_scaling=None,
                     max_window_layers=layers, layer_types=["full_attention"] * layers, **_decoder_keys(p))
    speakers = {} if base else shape.speakers
    talker = dict(vocab_size=shape.talker_vocab, hidden_size=t["hidden_size"], intermediate_size=t["intermediate_size"],
                  num_attention_heads=t["num_attention_heads"], max_position_embeddings=t["max_position_embeddings"],
                  text_hidden_size=t["text_hidden_size"], text_vocab_size=TEXT_VOCAB, **_decoder_keys(t),
                  rope_scaling=dict(interleaved=True, mrope_section=list(t["mrope_section"]), rope_type="default"),
                  **shape.codec_ids, spk_id=speakers, spk_is_dialect={s: DIALECTS.get(s, False) for s in speakers},
                  codec_language_id=shape.languages, code_predictor_config=predictor)
    # The x-vector stands in for a codec embedding row: enc_dim is the talker's width; mel_dim is
    # fixed at 128 by the reference's feature extraction; enc_channels[-1] = 3 middle blocks' sum.
    speaker = dict(mel_dim=128, enc_dim=t["hidden_size"], enc_channels=[32, 32, 32, 32, 96],
                   enc_kernel_sizes=[5, 3, 3, 3, 1], enc_dilations=[1, 2, 3, 4, 1], enc_attention_channels=16,
                   enc_res2net_scale=4, enc_se_channels=16, sample_rate=24000)
    return dict(architectures=["Qwen3TTSForConditionalGeneration"], model_type="qwen3_tts",
                tokenizer_type="qwen3_tts_tokenizer_12hz", tts_model_size=shape.size_tag,
                tts_model_type="base" if base else "custom_voice", assistant_token_id=tokens()["assistant"],
                **TEXT_IDS, talker_config=talker, speaker_encoder_config=speaker,
                torch_dtype=str(shape.dtype).removeprefix("torch."),
                chorus=dict(note="random weights: produces noise, not speech", version=VERSION))


def codec_config(shape: Qwen3Shape = TINY) -> dict:
    d = shape.decoder
    decoder = dict(codebook_size=shape.codebook, codebook_dim=d["codebook_dim"], num_quantizers=NUM_GROUPS,
                   latent_dim=d["latent_dim"], hidden_size=d["hidden_size"], intermediate_size=d["intermediate_size"],
                   num_hidden_layers=d["num_hidden_layers"], num_attention_heads=d["num_attention_heads"],
                   num_key_value_heads=d["num_key_value_heads"], head_dim=d["head_dim"], max_position_embeddings=8000,
                   rope_theta=10000, rms_norm_eps=1e-5, sliding_window=d["sliding_window"],
                   layer_scale_initial_scale=0.01, hidden_act="silu", attention_bias=False, attention_dropout=0.0,
                   upsample_rates=list(d["upsample_rates"]), upsampling_ratios=list(d["upsampling_ratios"]),
                   decoder_dim=d["decoder_dim"])
    spf = math.prod(decoder["upsample_rates"]) * math.prod(decoder["upsampling_ratios"])
    config = dict(architectures=["Qwen3TTSTokenizerV2Model"], model_type="qwen3_tts_tokenizer_12hz",
                  encoder_valid_num_quantizers=NUM_GROUPS, input_sample_rate=24000,
                  output_sample_rate=int(spf * 12.5), decode_upsample_rate=spf, encode_downsample_rate=1920,
                  decoder_config=decoder)
    if shape.encoder:  # a codec without one decodes only (it cannot clone in context)
        config["encoder_config"] = dict(shape.encoder)
    return config | dict(chorus=dict(encoder_weights=bool(shape.encoder)))


# ---------------------------------------------------------------------------------------------------
# Weights: a table name → (shape, init), then one seeded draw per tensor.


def linear(table: dict, name: str, n_in: int, n_out: int, bias: bool = False, gain: float = 1.0) -> None:
    table[f"{name}.weight"] = ((n_out, n_in), ("normal", gain / math.sqrt(n_in)))
    if bias:
        table[f"{name}.bias"] = ((n_out,), ("normal", 0.02))


def conv(table: dict, name: str, n_in: int, n_out: int, k: int, groups: int = 1, transposed: bool = False,
         bias: bool = True, gain: float = 1.0) -> None:
    shape = (n_in, n_out // groups, k) if transposed else (n_out, n_in // groups, k)
    fan_in = n_in // groups * (2 if transposed else k)  # a transposed conv's outputs see ~2 taps each
    table[f"{name}.weight"] = (shape, ("normal", gain / math.sqrt(fan_in)))
    if bias:
        table[f"{name}.bias"] = ((n_out,), ("normal", 0.02))


def norm(table: dict, name: str, dim: int, bias: bool = False, center: float = 1.0) -> None:
    # Not exactly one, so a port that drops or misplaces a norm's weight shows in parity tests.
    table[f"{name}.weight"] = ((dim,), ("around", center, 0.1))
    if bias:
        table[f"{name}.bias"] = ((dim,), ("normal", 0.02))


def decoder_layers(table: dict, prefix: str, c: dict, layer_scale: bool = False, qk_norm: bool = True) -> None:
    h, heads, kv, hd = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
    for i in range(c["num_hidden_layers"]):
        p = f"{prefix}.layers.{i}"
        for proj, n_out in (("q", heads * hd), ("k", kv * hd), ("v", kv * hd)):
            linear(table, f"{p}.self_attn.{proj}_proj", h, n_out)
        # A strong attention branch: with random weights the current input otherwise drowns out the
        # prompt, and speakers or languages would barely change the codes.
        linear(table, f"{p}.self_attn.o_proj", heads * hd, h, gain=3.0)
        if qk_norm:
            norm(table, f"{p}.self_attn.q_norm", hd, center=2.0)
            norm(table, f"{p}.self_attn.k_norm", hd, center=2.0)
        for proj in ("gate", "up"):
            linear(table, f"{p}.mlp.{proj}_proj", h, c["intermediate_size"])
        linear(table, f"{p}.mlp.down_proj", c["intermediate_size"], h)
        norm(table, f"{p}.input_layernorm", h)
        norm(table, f"{p}.post_attention_layernorm", h)
        if layer_scale:  # the reference inits 0.01; larger so the branches matter in a 2-layer model
            for s in ("self_attn_layer_scale", "mlp_layer_scale"):
                table[f"{p}.{s}.scale"] = ((h,), ("around", 0.3, 0.05))
    norm(table, f"{prefix}.norm", h)


def model_table(config: dict) -> dict:
    t, table = config["talker_config"], {}
    p, h = t["code_predictor_config"], t["hidden_size"]
    decoder_layers(table, "talker.model", t)
    table["talker.model.codec_embedding.weight"] = ((t["vocab_size"], h), ("normal", 1.0))
    table["talker.model.text_embedding.weight"] = ((t["text_vocab_size"], t["text_hidden_size"]), ("normal", 1.0))
    linear(table, "talker.text_projection.linear_fc1", t["text_hidden_size"], t["text_hidden_size"], bias=True)
    linear(table, "talker.text_projection.linear_fc2", t["text_hidden_size"], h, bias=True, gain=2.0)
    linear(table, "talker.codec_head", h, t["vocab_size"], gain=4.0)
    cp = "talker.code_predictor"
    decoder_layers(table, f"{cp}.model", p)
    for g in range(t["num_code_groups"] - 1):
        table[f"{cp}.model.codec_embedding.{g}.weight"] = ((p["vocab_size"], h), ("normal", 1.0))
        linear(table, f"{cp}.lm_head.{g}", p["hidden_size"], p["vocab_size"], gain=4.0)
    if p["hidden_size"] != h:
        linear(table, f"{cp}.small_to_mtp_projection", h, p["hidden_size"], bias=True)
    if config["tts_model_type"] == "base":
        speaker_table(table, "speaker_encoder", config["speaker_encoder_config"])
    return table


def speaker_table(table: dict, prefix: str, s: dict) -> None:
    ch, ks = s["enc_channels"], s["enc_kernel_sizes"]
    conv(table, f"{prefix}.blocks.0.conv", s["mel_dim"], ch[0], ks[0])
    for i in range(1, len(ch) - 1):
        b, scale = f"{prefix}.blocks.{i}", s["enc_res2net_scale"]
        conv(table, f"{b}.tdnn1.conv", ch[i - 1], ch[i], 1)
        for j in range(scale - 1):
            conv(table, f"{b}.res2net_block.blocks.{j}.conv", ch[i] // scale, ch[i] // scale, ks[i])
        conv(table, f"{b}.tdnn2.conv", ch[i], ch[i], 1)
        conv(table, f"{b}.se_block.conv1", ch[i], s["enc_se_channels"], 1)
        conv(table, f"{b}.se_block.conv2", s["enc_se_channels"], ch[i], 1)
    conv(table, f"{prefix}.mfa.conv", ch[-1], ch[-1], ks[-1])
    conv(table, f"{prefix}.asp.tdnn.conv", ch[-1] * 3, s["enc_attention_channels"], 1)
    conv(table, f"{prefix}.asp.conv", s["enc_attention_channels"], ch[-1], 1)
    conv(table, f"{prefix}.fc", ch[-1] * 2, s["enc_dim"], 1)


def snake(table: dict, name: str, dim: int) -> None:
    # Log-scale parameters (the reference exponentiates them): near zero, not exactly zero.
    table[f"{name}.alpha"] = ((dim,), ("normal", 0.1))
    table[f"{name}.beta"] = ((dim,), ("normal", 0.1))


def codec_table(d: dict) -> dict:
    table, dim, latent = {}, d["codebook_dim"], d["latent_dim"]
    pt = "decoder.pre_transformer"
    decoder_layers(table, pt, d, layer_scale=True, qk_norm=False)
    linear(table, f"{pt}.input_proj", latent, d["hidden_size"], bias=True)
    linear(table, f"{pt}.output_proj", d["hidden_size"], latent, bias=True)
    for part, n in (("rvq_first", 1), ("rvq_rest", d["num_quantizers"] - 1)):
        q = f"decoder.quantizer.{part}"
        conv(table, f"{q}.input_proj", dim, dim // 2, 1, bias=False)
        conv(table, f"{q}.output_proj", dim // 2, dim, 1, bias=False)
        for i in range(n):
            table[f"{q}.vq.layers.{i}._codebook.cluster_usage"] = ((d["codebook_size"],), ("uniform", 0.5, 2.0))
            table[f"{q}.vq.layers.{i}._codebook.embedding_sum"] = ((d["codebook_size"], dim // 2), ("normal", 1.0))
    conv(table, "decoder.pre_conv.conv", dim, latent, 3)
    for i, factor in enumerate(d["upsampling_ratios"]):
        u = f"decoder.upsample.{i}"
        conv(table, f"{u}.0.conv", latent, latent, factor, transposed=True)
        conv(table, f"{u}.1.dwconv.conv", latent, latent, 7, groups=latent)
        norm(table, f"{u}.1.norm", latent, bias=True)
        linear(table, f"{u}.1.pwconv1", latent, 4 * latent, bias=True)
        linear(table, f"{u}.1.pwconv2", 4 * latent, latent, bias=True)
        table[f"{u}.1.gamma"] = ((latent,), ("around", 0.3, 0.05))  # the reference inits 1e-6
    conv(table, "decoder.decoder.0.conv", latent, d["decoder_dim"], 7)
    for i, rate in enumerate(d["upsample_rates"]):
        b, n_in, n_out = f"decoder.decoder.{i + 1}.block", d["decoder_dim"] >> i, d["decoder_dim"] >> (i + 1)
        snake(table, f"{b}.0", n_in)
        conv(table, f"{b}.1.conv", n_in, n_out, 2 * rate, transposed=True)
        for j in range(3):
            snake(table, f"{b}.{j + 2}.act1", n_out)
            conv(table, f"{b}.{j + 2}.conv1.conv", n_out, n_out, 7)
            snake(table, f"{b}.{j + 2}.act2", n_out)
            conv(table, f"{b}.{j + 2}.conv2.conv", n_out, n_out, 1, gain=0.3)  # tames 3 residual adds
    out = d["decoder_dim"] >> len(d["upsample_rates"])
    last = len(d["upsample_rates"]) + 1
    snake(table, f"decoder.decoder.{last}", out)
    conv(table, f"decoder.decoder.{last + 1}.conv", out, 1, 7, gain=0.15)  # output std ~0.25, rarely clamped
    return table


def encoder_table(e: dict) -> dict:
    """The Mimi encoder's tensors, named as the reference's state dict (MimiConfig's kernel sizes:
    7 first, 3 in the residual blocks and last; one residual block per ratio, compress 2)."""
    table, width, hidden, dim = {}, e["num_filters"], e["hidden_size"], e["codebook_dim"]
    p = "encoder.encoder.layers"
    conv(table, f"{p}.0.conv", 1, width, 7)
    index = 1  # each ratio: a residual block, an ELU, a strided conv
    for ratio in reversed(e["upsampling_ratios"]):
        conv(table, f"{p}.{index}.block.1.conv", width, width // 2, 3)
        conv(table, f"{p}.{index}.block.3.conv", width // 2, width, 1)
        conv(table, f"{p}.{index + 2}.conv", width, 2 * width, 2 * ratio)
        index, width = index + 3, width * 2
    conv(table, f"{p}.{index + 1}.conv", width, hidden, 3)
    for i in range(e["num_hidden_layers"]):
        t = f"encoder.encoder_transformer.layers.{i}"
        for proj in ("q", "k", "v", "o"):
            linear(table, f"{t}.self_attn.{proj}_proj", hidden, hidden)
        linear(table, f"{t}.mlp.fc1", hidden, e["intermediate_size"])
        linear(table, f"{t}.mlp.fc2", e["intermediate_size"], hidden)
        norm(table, f"{t}.input_layernorm", hidden, bias=True)
        norm(table, f"{t}.post_attention_layernorm", hidden, bias=True)
        for s in ("self_attn_layer_scale", "mlp_layer_scale"):  # the reference inits 0.01
            table[f"{t}.{s}.scale"] = ((hidden,), ("around", 0.3, 0.05))
    conv(table, "encoder.downsample.conv", hidden, hidden, 4, bias=False)
    for part, n in (("semantic", 1), ("acoustic", e["num_quantizers"] - 1)):
        q = f"encoder.quantizer.{part}_residual_vector_quantizer"
        # Projected frames spread wider than the codebooks (std ~1.6 vs ~1) and usages kept near 1
        # (so no codebook vectors are much shorter than the rest): otherwise a few vectors nearest
        # the frames' mean take most frames, and the codes of a clip barely vary.
        conv(table, f"{q}.input_proj", hidden, dim, 1, bias=False, gain=3.0)
        conv(table, f"{q}.output_proj", dim, hidden, 1, bias=False)
        for i in range(n):
            table[f"{q}.layers.{i}.codebook.initialized"] = ((1,), ("constant", 1.0))
            table[f"{q}.layers.{i}.codebook.cluster_usage"] = ((e["codebook_size"],), ("uniform", 0.8, 1.25))
            table[f"{q}.layers.{i}.codebook.embed_sum"] = ((e["codebook_size"], dim), ("normal", 1.0))
    return table


def random_weights(table: dict, seed: int, dtype: torch.dtype = torch.float32) -> dict[str, torch.Tensor]:
    """One generator per tensor, seeded by its name: a tensor's values do not depend on the others
    (drawn in float32, then stored as `dtype` one by one: a large shape never holds two copies)."""
    weights = {}
    for name, (shape, init) in sorted(table.items()):
        g = torch.Generator().manual_seed(seed * 1_000_003 + zlib.crc32(name.encode()))
        kind, *args = init
        if kind == "normal":
            w = torch.randn(shape, generator=g) * args[0]
        elif kind == "around":
            w = args[0] + torch.randn(shape, generator=g) * args[1]
        elif kind == "constant":
            w = torch.full(shape, args[0])
        else:
            w = args[0] + torch.rand(shape, generator=g) * (args[1] - args[0])
        weights[name] = w.to(dtype).contiguous()
    return weights
