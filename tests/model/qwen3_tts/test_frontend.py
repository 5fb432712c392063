"""Qwen3-TTS prompt preparation: voices, languages, instructions, clones and limits per checkpoint
type, and (with the golden fixture) the reference's prompt embeddings rebuilt from our layout."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file

from model.families.base import PromptTooLong, VoiceNotFoundError
from model.families.qwen3_tts import tiny_random, tiny_tokenizer
from model.families.qwen3_tts.config import Qwen3TtsConfig
from model.families.qwen3_tts.frontend import BadInstructions, LanguageNotSupported, Qwen3Frontend
from model.families.qwen3_tts.prompt import SPEAKER_VECTOR

HIDDEN = 64  # the tiny talker's width, which an x-vector must have
GOLDEN = Path(__file__).parent / "golden"
GOLDEN_META = json.loads((GOLDEN / "cases.json").read_text()) if (GOLDEN / "cases.json").is_file() else {}
# The golden cases whose prompt the reference recorded; none until the fixture is generated.
GOLDEN_CASES = [case for case in GOLDEN_META.get("cases", ()) if "prompt_positions" in case]


def write_checkpoint(folder, model_type="custom_voice", **top):
    """A weightless checkpoint folder: what the front end reads (config, generation, tokenizer)."""
    config = tiny_random.model_config(base=model_type == "base") | {"tts_model_type": model_type} | top
    if model_type == "voice_design":
        config["talker_config"] |= {"spk_id": {}, "spk_is_dialect": {}}
    folder.mkdir(parents=True, exist_ok=True)
    tiny_tokenizer.write_json(folder / "config.json", config)
    tiny_tokenizer.write_json(folder / "generation_config.json", tiny_random.GENERATION)
    tiny_tokenizer.write_tokenizer(folder)
    return folder


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("qwen3-frontend")
    return {kind: write_checkpoint(root / kind, kind) for kind in ("custom_voice", "voice_design", "base")}


@pytest.fixture(scope="module")
def custom(folders):
    return Qwen3Frontend.from_folder("tiny-cv", folders["custom_voice"])


@pytest.fixture(scope="module")
def base(folders):
    return Qwen3Frontend.from_folder("tiny-base", folders["base"])


def test_custom_voice_serves_its_speakers_case_insensitively(custom):
    assert custom.voices == tuple(tiny_random.SPEAKERS)
    assert custom.languages == ("auto", "english", "german", "chinese", "japanese")
    prompt = custom.prepare("she said", "VIVIAN", language="English")
    assert (tiny_random.SPEAKERS["vivian"],) in prompt.codec
    assert (prompt.speaker, prompt.language, prompt.cache_salt) == ("vivian", "english", "tiny-cv")
    assert prompt.num_text_tokens == len(custom.tokenizer.assistant("she said").text)
    with pytest.raises(VoiceNotFoundError):
        custom.prepare("she said", "nobody")
    with pytest.raises(LanguageNotSupported) as refused:
        custom.prepare("she said", "vivian", language="klingon")
    assert refused.value.available == custom.languages


def test_the_display_spelling_is_the_checkpoints(tmp_path):
    folder = write_checkpoint(tmp_path)
    config = json.loads((folder / "config.json").read_text())
    config["talker_config"]["spk_id"] = {"Vivian": 1017, "Uncle_Fu": 962}
    config["talker_config"]["spk_is_dialect"] = {"Vivian": False, "Uncle_Fu": False}
    (folder / "config.json").write_text(json.dumps(config))
    frontend = Qwen3Frontend.from_folder("tiny", folder)
    assert frontend.voices == ("Vivian", "Uncle_Fu")
    assert frontend.prepare("hi", "uncle_fu").speaker == "Uncle_Fu"


def test_a_dialect_speaker_speaks_its_dialect_for_chinese(custom):
    prompt = custom.prepare("你好", "eric", language="chinese")
    assert (custom.config.languages["sichuan_dialect"],) in prompt.codec


def test_instructions_open_a_custom_voice_prompt_unless_the_checkpoint_ignores_them(custom, tmp_path):
    plain = custom.prepare("she said", "ryan")
    styled = custom.prepare("she said", "ryan", instructions="whisper")
    instruction = custom.tokenizer.instruction("whisper")
    assert styled.text_ids == instruction + plain.text_ids
    assert styled.token_ids[len(instruction):] == plain.token_ids
    small = Qwen3Frontend.from_folder("tiny-0b6", write_checkpoint(tmp_path, tts_model_size="0b6"))
    assert not small.reads_instructions
    assert small.prepare("she said", "ryan", instructions="whisper") == small.prepare("she said", "ryan")


# What the reference's generate_custom_voice did with an instruction under each tts_model_size
# (make_golden.py): "read", "dropped" (`tts_model_size in "0b6"`), or TypeError (None: it speaks no
# custom voice at all; Chorus reads them there, as the reference's model reads instruct_ids).
INSTRUCTION_SIZES = GOLDEN_META.get("instruction_sizes", ())


def test_the_recorded_sizes_hold_the_released_tags_every_substring_and_none():
    assert {"0b6", "1b7", "0b", "b6", "6", "0", "b", "", None} <= {case["tts_model_size"] for case in INSTRUCTION_SIZES}


@pytest.mark.parametrize("case", INSTRUCTION_SIZES, ids=lambda case: repr(case["tts_model_size"]))
def test_a_custom_voice_reads_instructions_where_the_reference_does(custom, case):
    written = {k: v for k, v in tiny_random.model_config(base=False).items() if k != "tts_model_size"}
    if case["tts_model_size"] is not None:
        written["tts_model_size"] = case["tts_model_size"]
    frontend = Qwen3Frontend("tiny", Qwen3TtsConfig.from_dicts(written), custom.tokenizer)
    plain = frontend.prepare("she said", "ryan")
    styled = frontend.prepare("she said", "ryan", instructions="whisper")
    reads = case["instruct"] != "dropped"
    assert frontend.reads_instructions is reads
    assert (styled.text_ids == custom.tokenizer.instruction("whisper") + plain.text_ids) is reads
    assert (styled == plain) is not reads


def test_only_a_custom_voice_drops_instructions_for_its_size(tmp_path):
    designed = Qwen3Frontend.from_folder("tiny-vd", write_checkpoint(tmp_path / "vd", "voice_design",
                                                                      tts_model_size="0b6"))
    assert designed.reads_instructions
    assert designed.prepare("she said", "designed", instructions="a deep calm voice").text_ids[:3] == \
        designed.tokenizer.instruction("a deep calm voice")[:3]
    base = Qwen3Frontend.from_folder("tiny-base", write_checkpoint(tmp_path / "base", "base", tts_model_size="1b7"))
    assert not base.reads_instructions


def test_voice_design_has_one_voice_described_by_required_instructions(folders):
    frontend = Qwen3Frontend.from_folder("tiny-vd", folders["voice_design"])
    assert frontend.voices == ("designed",)
    prompt = frontend.prepare("she said", "designed", instructions="a deep calm voice")
    assert prompt.text_ids[:3] == frontend.tokenizer.instruction("a deep calm voice")[:3]
    assert all(len(entry) != 1 or entry[0] not in frontend.config.speakers.values() for entry in prompt.codec)
    for missing in (None, "", "  "):
        with pytest.raises(BadInstructions, match="instructions"):
            frontend.prepare("she said", "designed", instructions=missing)


def test_base_has_no_voices_and_refuses_instructions(base):
    assert base.voices == ()
    with pytest.raises(VoiceNotFoundError):
        base.prepare("she said", "vivian")
    with pytest.raises(BadInstructions, match="instructions"):
        base.prepare("she said", "vivian", instructions="whisper")


def test_a_clone_salts_its_cache_keys_with_its_vector_and_frames(base):
    vector = torch.randn(HIDDEN, generator=torch.Generator().manual_seed(1))
    codes = torch.randint(0, tiny_random.CODEBOOK, (4, tiny_random.NUM_GROUPS),
                          generator=torch.Generator().manual_seed(2))
    x_only = base.prepare_clone("she said", speaker_vector=vector.to(torch.bfloat16))
    assert (SPEAKER_VECTOR,) in x_only.codec and x_only.speaker_vector.dtype == torch.float32
    in_context = base.prepare_clone("she said", speaker_vector=vector, reference_text="hello", reference_codes=codes)
    assert in_context.codec.count((SPEAKER_VECTOR,)) == 1 and tuple(codes[0].tolist()) in in_context.codec
    salts = {x_only.cache_salt, in_context.cache_salt,
             base.prepare_clone("she said", speaker_vector=vector + 1).cache_salt,
             base.prepare_clone("she said", speaker_vector=vector, reference_text="hello",
                                reference_codes=codes.flip(0)).cache_salt}
    assert len(salts) == 4 and all(salt.startswith("tiny-base:") for salt in salts)
    assert base.prepare_clone("other", speaker_vector=vector, reference_text="hi",
                              reference_codes=codes.tolist()).cache_salt == in_context.cache_salt
    copy = pickle.loads(pickle.dumps(in_context))
    assert torch.equal(copy.speaker_vector, in_context.speaker_vector) and copy.codec == in_context.codec


@pytest.mark.parametrize(("kwargs", "message"), [
    (dict(speaker_vector=torch.zeros(HIDDEN + 1)), "shape"),
    (dict(speaker_vector=torch.zeros(HIDDEN), reference_text="hi"), "both"),
    (dict(speaker_vector=torch.zeros(HIDDEN), reference_codes=[[0] * 16]), "both"),
    (dict(speaker_vector=torch.zeros(HIDDEN), reference_text="hi", reference_codes=[0] * 16), "frames"),
])
def test_malformed_clones_are_refused(base, kwargs, message):
    with pytest.raises(ValueError, match=message):
        base.prepare_clone("she said", **kwargs)


def test_only_a_base_checkpoint_clones(custom):
    with pytest.raises(ValueError, match="base"):
        custom.prepare_clone("she said", speaker_vector=torch.zeros(HIDDEN))


@pytest.mark.parametrize("non_streaming", [False, True])
def test_max_tokens_counts_prompt_positions_and_trailing_text(custom, non_streaming):
    text = "the weather is nice and the voice is clear"
    prompt = custom.prepare(text, "ryan", non_streaming=non_streaming)
    exact = len(prompt.token_ids) + len(prompt.trailing_ids)
    assert custom.prepare(text, "ryan", max_tokens=exact, non_streaming=non_streaming).token_ids == prompt.token_ids
    with pytest.raises(PromptTooLong) as refused:
        custom.prepare(text, "ryan", max_tokens=exact - 1, non_streaming=non_streaming)
    assert (refused.value.tokens, refused.value.limit) == (exact, exact - 1)


def test_default_sampling_is_the_generation_config(custom, tmp_path):
    params = custom.default_sampling()
    g = tiny_random.GENERATION
    assert (params.temperature, params.top_k, params.top_p, params.repetition_penalty, params.max_tokens,
            params.min_tokens) == (g["temperature"], g["top_k"], g["top_p"], g["repetition_penalty"],
                                   g["max_new_tokens"], 2)
    folder = write_checkpoint(tmp_path)
    tiny_tokenizer.write_json(folder / "generation_config.json", g | {"do_sample": False})
    assert Qwen3Frontend.from_folder("tiny", folder).default_sampling().greedy


# ---------------------------------------------------------------------------------------------------
# Golden: the reference's prompt embeddings, rebuilt from our tracks as the reference embeds them.


class ReferenceEmbedding:
    """The reference's inputs from a checkpoint's weights: text track through text_projection
    (fc1, SiLU, fc2, with biases); codec track from the talker's codec table, an x-vector, or a
    frame summed over the talker's table (code 0) and the code predictor's tables (codes 1..)."""

    def __init__(self, weights: dict[str, torch.Tensor]) -> None:
        self.w = {name.removeprefix("talker."): value for name, value in weights.items()}

    def text(self, ids: list[int]) -> torch.Tensor:
        w = self.w
        hidden = F.linear(w["model.text_embedding.weight"][ids], w["text_projection.linear_fc1.weight"],
                          w["text_projection.linear_fc1.bias"])
        return F.linear(F.silu(hidden), w["text_projection.linear_fc2.weight"], w["text_projection.linear_fc2.bias"])

    def codec(self, entry: tuple[int, ...], vector: torch.Tensor | None) -> torch.Tensor | float:
        if not entry:
            return 0.0
        if entry == (SPEAKER_VECTOR,):
            return vector
        return self.w["model.codec_embedding.weight"][entry[0]] + sum(
            self.w[f"code_predictor.model.codec_embedding.{k}.weight"][code] for k, code in enumerate(entry[1:]))

    def prompt(self, prompt) -> torch.Tensor:
        return torch.stack([row + self.codec(entry, prompt.speaker_vector)
                            for row, entry in zip(self.text(prompt.text_ids), prompt.codec)])


@pytest.fixture(scope="module")
def golden(chorus_cache):
    arrays = dict(np.load(GOLDEN / "golden.npz"))
    frontends, embeddings = {}, {}
    for kind in ("custom_voice", "base"):
        folder = tiny_random.ensure_tiny_qwen3(chorus_cache, base=kind == "base")
        weights = folder / "model.safetensors"
        if hashlib.sha256(weights.read_bytes()).hexdigest() != GOLDEN_META["checkpoints"][kind]["model_sha256"]:
            pytest.fail(f"the golden fixture was made from other {kind} weights: regenerate it (make qwen3-golden)")
        frontends[kind] = Qwen3Frontend.from_folder(kind, folder)
        embeddings[kind] = ReferenceEmbedding(load_file(str(weights)))
    # A voice-design prompt is a custom-voice checkpoint's prompt without a speaker.
    custom = frontends["custom_voice"]
    frontends["voice_design"] = Qwen3Frontend("design", dataclasses.replace(custom.config, model_type="voice_design"),
                                              custom.tokenizer)
    return arrays, frontends, embeddings


def golden_prompt(case: dict, arrays: dict, frontends: dict):
    options = dict(language=case["language"], non_streaming=case["non_streaming_mode"])
    if case["model"] == "base":
        codes = arrays.get(f"ref_codes_{case['name']}")
        return frontends["base"].prepare_clone(case["text"], speaker_vector=torch.from_numpy(arrays["base_xvector"]),
                                               reference_text=case.get("ref_text"), reference_codes=codes, **options)
    if case.get("speaker"):
        return frontends["custom_voice"].prepare(case["text"], case["speaker"], instructions=case.get("instruct"),
                                                 **options)
    return frontends["voice_design"].prepare(case["text"], "designed", instructions=case["instruct"], **options)


def assert_within(actual: torch.Tensor, expected: torch.Tensor, tolerance: float = 1e-5) -> None:
    # NOTE: not torch.testing.assert_close, whose first call imports for ~2 s.
    assert actual.shape == expected.shape
    assert (actual - expected).abs().max() <= tolerance


@pytest.mark.parametrize("case", GOLDEN_CASES, ids=lambda case: case["name"])
def test_golden_prompt_embeddings(golden, case):
    arrays, frontends, embeddings = golden
    prompt = golden_prompt(case, arrays, frontends)
    kind = "base" if case["model"] == "base" else "custom_voice"
    assert frontends[kind].sample_rate == case["sample_rate"]
    embed = embeddings[kind]
    expected = torch.from_numpy(arrays[f"talker_embeds_{case['name']}"])
    assert_within(embed.prompt(prompt), expected)
    # The reference pads its trailing text to at least one row with tts_pad; we stop at the text.
    trailing = torch.from_numpy(arrays[f"trailing_{case['name']}"])
    pad_ids = [frontends["custom_voice"].config.text.tts_pad] * (len(trailing) - len(prompt.trailing_ids))
    assert_within(embed.text(prompt.trailing_ids + pad_ids), trailing)
    assert prompt.num_text_tokens == len(arrays[f"input_ids_{case['name']}"]) - 8  # role 3, tail 5
