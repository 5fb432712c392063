"""Writes the Qwen3-TTS golden fixtures (cases.json + golden.npz beside this file) from the reference.

Run by `make qwen3-golden`, in .venv-qwen-ref (torch 2.13 CPU, transformers 4.57.3, qwen-tts 0.1.1
installed --no-deps): never by the test suite. It builds both tiny checkpoints with Chorus's own
builder, loads them with the reference's classes, and records for each case what Chorus must
reproduce: the reference tokenizer's ids, the talker's prompt embeddings and trailing text, the
greedy codes and their whole decode; for the base model the clip, its mel and x-vector, and the
reference codes; clones the reference made from the clip itself (create_voice_clone_prompt, then
generate_voice_clone: its codes and the audio it returns); the speech tokenizer's codes of two clips
(24 kHz, and 16 kHz, which it resamples); and one sampled run's logits before and after the
reference's processors. Beside them, large_vocab.json: the reference's text ids on a vocabulary past
100,000 entries, where its processor splits words otherwise (text_split_cases.py).
The reference is imported through importlib only: the project's import graph never names it.
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.machinery
import importlib.metadata
import json
import re
import shutil
import sys
import tempfile
import types
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[3]))  # the repository root, for Chorus's builder

from model.families.qwen3_tts.tiny_random import (VERSION, ensure_tiny_qwen3,  # noqa: E402
                                                   write_large_vocab_tokenizer)
from tests.model.qwen3_tts.text_split_cases import CASES as SPLIT_CASES  # noqa: E402
from tests.model.qwen3_tts.text_split_cases import INSTRUCTION, TEXTS, write_case  # noqa: E402

ref = None  # the reference's inference module (qwen3_tts_model), imported by main()
MAX_NEW_TOKENS = 32
SEED = 1234
TEXT_EN = "Hello world, this is a tiny test of speech."
TEXT_ZH = "你好，今天天气很好。我们说话。"
TEXT_SHORT = "Good morning."  # fewer text tokens than frames: streaming reads tts_pad after them
INSTRUCT = "Speak slowly, in a warm and calm voice."
CASES = [  # each runs in streaming (non_streaming_mode=False) and non-streaming mode
    dict(name="cv_vivian_auto_en", model="custom_voice", text=TEXT_EN, language="Auto", speaker="Vivian"),
    dict(name="cv_ryan_chinese_zh", model="custom_voice", text=TEXT_ZH, language="Chinese", speaker="ryan"),
    dict(name="cv_eric_auto_zh", model="custom_voice", text=TEXT_ZH, language="auto", speaker="eric"),
    dict(name="cv_dylan_english_en", model="custom_voice", text=TEXT_SHORT, language="english", speaker="dylan"),
    dict(name="cv_vivian_instruct_en", model="custom_voice", text=TEXT_EN, language="english",
         speaker="vivian", instruct=INSTRUCT),
    dict(name="cv_design_en", model="custom_voice", text=TEXT_EN, language="auto", instruct=INSTRUCT),
    dict(name="base_xvec_en", model="base", text=TEXT_EN, language="english"),
    # ref text + text longer than the reference frames (the rest trails), then shorter (pads trail)
    dict(name="base_icl_en", model="base", text=TEXT_EN, language="auto", ref_text="The weather is nice.",
         ref_frames=8),
    dict(name="base_icl_zh", model="base", text=TEXT_ZH, language="chinese", ref_text="我们说话。", ref_frames=40),
]
# config.json tts_model_size values whose effect on a custom voice's instruction is recorded
# ("instruction_sizes" in cases.json): the released ones ("0b6", "1b7"), every other substring of
# "0b6", absent (None), and near misses.
INSTRUCTION_SIZES = ("0b6", "1b7", "0b", "b6", "6", "0", "b", "", None, "0B6", "0.6b", "0b60", " 0b6", "1b6", "tiny")
# Voices the reference clones from base_clip itself, each spoken in streaming mode (non_streaming_mode
# False: generate_voice_clone's default) and non-streaming mode; listed as "clip_cases" in cases.json.
CLIP_CASES = [
    dict(name="clip_icl_en", model="base", text=TEXT_EN, language="english", ref_text="The weather is nice today."),
    dict(name="clip_xvec_en", model="base", text=TEXT_EN, language="auto"),
]


def import_reference():
    """The reference's modules. torchaudio has no build for this torch; only the 25 Hz tokenizer
    imports it (never called here), so an empty module satisfies that import."""
    for name in ("torchaudio", "torchaudio.compliance", "torchaudio.compliance.kaldi"):
        stub = types.ModuleType(name)
        stub.__path__, stub.__spec__ = [], importlib.machinery.ModuleSpec(name, None, is_package=True)
        sys.modules.setdefault(name, stub)
    sys.modules["torchaudio"].compliance = sys.modules["torchaudio.compliance"]
    sys.modules["torchaudio.compliance"].kaldi = sys.modules["torchaudio.compliance.kaldi"]
    return (importlib.import_module("qwen_tts.inference.qwen3_tts_model"),
            importlib.import_module("qwen_tts.core.models.modeling_qwen3_tts"))


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def check_keys(module: torch.nn.Module, file: Path) -> None:
    """The checkpoint's keys are exactly the module's state dict (the codec's Mimi encoder included)."""
    from safetensors import safe_open
    with safe_open(str(file), "pt") as f:
        keys = set(f.keys())
    expected = set(module.state_dict())
    assert keys == expected, (sorted(expected - keys), sorted(keys - expected))


class Recorder:
    """Captures, per generate() call, the talker's prompt inputs and each processor pass (scores
    before and after the reference's LogitsProcessorList) of the talker and the code predictor."""

    def __init__(self, model):
        self.reset()
        model.talker.model.register_forward_pre_hook(self._model_inputs, with_kwargs=True)
        model.talker.register_forward_pre_hook(self._talker_inputs, with_kwargs=True)
        for name, module in (("talker", model.talker), ("predictor", model.talker.code_predictor)):
            module._get_logits_processor = self._recording(name, module._get_logits_processor)

    def reset(self):
        self.embeds = self.trailing = None
        self.calls = {"talker": [], "predictor": []}
        self.processors = {}

    def _model_inputs(self, module, args, kwargs):
        if self.embeds is None:
            self.embeds = kwargs["inputs_embeds"][0].detach().clone()

    def _talker_inputs(self, module, args, kwargs):
        if self.trailing is None:
            self.trailing = kwargs["trailing_text_hidden"][0].detach().clone()

    def _recording(self, name, original):
        def get(*args, **kwargs):
            procs = original(*args, **kwargs)
            self.processors[name] = [describe(p) for p in procs]
            calls = self.calls[name]

            class Recording(type(procs)):
                def __call__(self, input_ids, scores, **kw):
                    before = scores.detach().clone()
                    after = super().__call__(input_ids, scores, **kw)
                    calls.append((input_ids[0].clone(), before[0], after[0].detach().clone()))
                    return after
            return Recording(procs)
        return get


def describe(processor) -> dict:
    fields = {k: v for k, v in vars(processor).items() if isinstance(v, (int, float, bool, str))}
    if hasattr(processor, "suppress_tokens"):  # as [start, stop) runs: the list itself is ~1,000 ids
        runs = []
        for t in sorted(int(t) for t in processor.suppress_tokens.tolist()):
            if runs and runs[-1][1] == t:
                runs[-1][1] = t + 1
            else:
                runs.append([t, t + 1])
        fields["suppress_token_ranges"] = runs
    return {"class": type(processor).__name__, **fields}


def synthetic_clip(seconds: float = 1.5, rate: int = 24000) -> np.ndarray:
    """A deterministic 'voice': a gliding tone with two harmonics plus a little noise."""
    t = np.arange(int(seconds * rate)) / rate
    phase = 2 * np.pi * (140 * t + 60 * t ** 2)
    tone = 0.3 * np.sin(phase) + 0.12 * np.sin(2 * phase) + 0.05 * np.sin(3 * phase)
    return (tone + 0.02 * np.random.default_rng(SEED).standard_normal(t.size)).astype(np.float32)


def main() -> None:
    global ref
    ref, modeling = import_reference()
    torch.manual_seed(SEED)
    arrays, cases, meta = {}, [], {"checkpoints": {}}
    with tempfile.TemporaryDirectory() as tmp:
        wrappers, folders = {}, {}
        for kind, base in (("custom_voice", False), ("base", True)):
            folder = folders[kind] = ensure_tiny_qwen3(Path(tmp), base=base)
            wrap = ref.Qwen3TTSModel.from_pretrained(str(folder))
            check_keys(wrap.model.speech_tokenizer.model, folder / "speech_tokenizer" / "model.safetensors")
            check_keys(wrap.model, folder / "model.safetensors")
            meta["checkpoints"][kind] = dict(
                name=folder.name, model_sha256=sha256(folder / "model.safetensors"),
                codec_sha256=sha256(folder / "speech_tokenizer" / "model.safetensors"))
            wrappers[kind] = (wrap, Recorder(wrap.model))
        base_wrap = wrappers["base"][0]
        clip = synthetic_clip()
        arrays["base_clip"] = clip
        arrays["base_mel"] = modeling.mel_spectrogram(
            torch.from_numpy(clip)[None], n_fft=1024, num_mels=128, sampling_rate=24000, hop_size=256,
            win_size=1024, fmin=0, fmax=12000)[0].T.float().numpy()
        xvector = base_wrap.model.extract_speaker_embedding(clip, 24000)
        arrays["base_xvector"] = xvector.float().numpy()
        encode_clips(base_wrap.model.speech_tokenizer, clip, arrays)
        for spec in CASES:
            for streaming in (True, False):
                cases.append(run_case(spec, streaming, wrappers, xvector, arrays))
        clip_cases = [run_clip_case(spec, streaming, wrappers["base"], arrays)
                      for spec in CLIP_CASES for streaming in (True, False)]
        cases.append(run_sampled(wrappers["custom_voice"], arrays))
        instruction_sizes = record_instruction_sizes(wrappers["custom_voice"][0])
        splits = record_text_splits(Path(tmp), folders["custom_voice"])
    meta.update(
        builder_version=VERSION, max_new_tokens=MAX_NEW_TOKENS,
        versions={name: importlib.metadata.version(name) for name in ("qwen-tts", "transformers", "torch", "numpy")},
        processors={name: rec.processors for name, (_, rec) in wrappers.items()},
        processors_note="each checkpoint's LogitsProcessorList of its last generate(): custom_voice's is the "
                        "sampled run's, base's a greedy run's (no warpers; the code predictor's is empty)",
        cases=cases, clip_cases=clip_cases, instruction_sizes=instruction_sizes,
        arrays={k: describe_array(k, v) for k, v in sorted(arrays.items())})
    (HERE / "cases.json").write_text(json.dumps(meta, indent=1, ensure_ascii=False) + "\n")
    np.savez_compressed(HERE / "golden.npz", **arrays)
    # NOTE: one id list a line: json's indent would give each id its own.
    text = json.dumps(splits, indent=1, ensure_ascii=False)
    (HERE / "large_vocab.json").write_text(re.sub(r"\[[-\d,\s]*\]", lambda m: json.dumps(json.loads(m.group())), text)
                                          + "\n")
    print(f"{len(cases)} cases, {len(clip_cases)} clip cases, {len(arrays)} arrays, "
          f"{(HERE / 'golden.npz').stat().st_size} bytes")


def encode_clips(tokenizer, clip: np.ndarray, arrays: dict) -> None:
    """The speech tokenizer's codes of the 24 kHz clip, and of a shorter one at 16 kHz, with the
    24 kHz samples the tokenizer resampled that one to (librosa's soxr) before encoding them."""
    arrays["base_clip_codes"] = tokenizer.encode(clip, sr=24000).audio_codes[0].numpy().astype(np.int64)
    rate = 16000
    arrays["clip16k"] = clip16k = synthetic_clip(0.93, rate)
    arrays["clip16k_at_24k"] = tokenizer._normalize_audio_inputs(clip16k, sr=rate)[0]
    arrays["clip16k_codes"] = tokenizer.encode(clip16k, sr=rate).audio_codes[0].numpy().astype(np.int64)


def run_case(spec: dict, streaming: bool, wrappers: dict, xvector: torch.Tensor, arrays: dict) -> dict:
    wrap, rec = wrappers[spec["model"]]
    name = f"{spec['name']}_{'stream' if streaming else 'full'}"
    ids = wrap._tokenize_texts([wrap._build_assistant_text(spec["text"])])[0]
    arrays[f"input_ids_{name}"] = ids[0].numpy()
    kwargs = dict(input_ids=[ids], languages=[spec["language"]], non_streaming_mode=not streaming)
    if spec.get("speaker"):
        kwargs["speakers"] = [spec["speaker"]]
    if spec.get("instruct"):
        instruct = wrap._tokenize_texts([wrap._build_instruct_text(spec["instruct"])])[0]
        arrays[f"instruct_ids_{name}"] = instruct[0].numpy()
        kwargs["instruct_ids"] = [instruct]
    ref_code = None
    if spec["model"] == "base":
        if spec.get("ref_text"):
            ref_ids = wrap._tokenize_texts([wrap._build_ref_text(spec["ref_text"])])[0]
            ref_code = torch.from_numpy(np.random.default_rng(SEED + spec["ref_frames"]).integers(
                0, wrap.model.config.talker_config.code_predictor_config.vocab_size, (spec["ref_frames"], 16)))
            arrays[f"ref_ids_{name}"], arrays[f"ref_codes_{name}"] = ref_ids[0].numpy(), ref_code.numpy()
            kwargs["ref_ids"] = [ref_ids]
        item = ref.VoiceClonePromptItem(ref_code=ref_code, ref_spk_embedding=xvector, ref_text=spec.get("ref_text"),
                                        x_vector_only_mode=ref_code is None, icl_mode=ref_code is not None)
        kwargs["voice_clone_prompt"] = wrap._prompt_items_to_voice_clone_prompt([item])
    gen = greedy_kwargs(wrap)
    rec.reset()
    codes = wrap.model.generate(**kwargs, **gen)[0][0]
    return dict(name=name, **{k: v for k, v in spec.items() if k != "name"}, non_streaming_mode=not streaming,
                generate=gen, **record_run((wrap, rec), name, codes, ref_code, arrays))


def greedy_kwargs(wrap) -> dict:
    return wrap._merge_generate_kwargs(do_sample=False, subtalker_dosample=False, max_new_tokens=MAX_NEW_TOKENS)


def record_run(wrapper: tuple, name: str, codes: torch.Tensor, ref_code: torch.Tensor | None, arrays: dict) -> dict:
    """Records one greedy generate()'s codes, prompt inputs and decodes under `name`; returns what
    the case's entry says about the run."""
    wrap, rec = wrapper
    arrays[f"codes_{name}"] = codes.numpy().astype(np.int64)
    arrays[f"talker_embeds_{name}"] = rec.embeds.float().numpy()
    arrays[f"trailing_{name}"] = rec.trailing.float().numpy()
    wavs, rate = wrap.model.speech_tokenizer.decode([{"audio_codes": codes}])
    arrays[f"audio_{name}"] = wavs[0]
    if ref_code is not None:  # what the reference's generate_voice_clone returns: decoded after the
        # reference frames, then cut at their share of the samples
        whole = wrap.model.speech_tokenizer.decode([{"audio_codes": torch.cat([ref_code, codes])}])[0][0]
        cut = int(ref_code.shape[0] / max(ref_code.shape[0] + codes.shape[0], 1) * whole.shape[0])
        arrays[f"audio_icl_{name}"] = whole[cut:]
    eos = wrap.model.config.talker_config.codec_eos_token_id
    stop = "eos" if int(rec.calls["talker"][-1][2].argmax()) == eos else "max_new_tokens"
    print(name, tuple(codes.shape), stop, flush=True)
    return dict(frames=int(codes.shape[0]), stop=stop, sample_rate=rate, prompt_positions=int(rec.embeds.shape[0]),
                trailing_positions=int(rec.trailing.shape[0]))


def run_clip_case(spec: dict, streaming: bool, wrapper: tuple, arrays: dict) -> dict:
    """A voice the reference clones from base_clip (in context with `ref_text`, else x-vector only),
    spoken through its public generate_voice_clone. What it returns is recorded as the audio_icl_
    (in context) or audio_ (x-vector) array: checked equal to record_run's decodes."""
    wrap, rec = wrapper
    name = f"{spec['name']}_{'stream' if streaming else 'full'}"
    in_context = "ref_text" in spec
    items = wrap.create_voice_clone_prompt(ref_audio=(arrays["base_clip"], 24000), ref_text=spec.get("ref_text"),
                                           x_vector_only_mode=not in_context)
    # The clone prompt holds the same encoders' outputs the other arrays record.
    assert np.array_equal(items[0].ref_spk_embedding.float().numpy(), arrays["base_xvector"])
    assert (items[0].ref_code is None) != in_context
    if in_context:
        assert np.array_equal(items[0].ref_code.numpy(), arrays["base_clip_codes"])
    mode = {} if streaming else dict(non_streaming_mode=True)  # streaming: generate_voice_clone's default
    gen, generated = greedy_kwargs(wrap), []
    generate = wrap.model.generate

    def recording_generate(**kwargs):  # generate_voice_clone returns audio only: keep its codes
        generated.append(generate(**kwargs))
        return generated[-1]

    wrap.model.generate = recording_generate
    rec.reset()
    try:
        wavs, _ = wrap.generate_voice_clone(spec["text"], spec["language"], voice_clone_prompt=items, **mode, **gen)
    finally:
        del wrap.model.generate
    facts = record_run(wrapper, name, generated[0][0][0], items[0].ref_code, arrays)
    assert np.array_equal(wavs[0], arrays[f"audio_icl_{name}" if in_context else f"audio_{name}"])
    return dict(name=name, **{k: v for k, v in spec.items() if k != "name"}, clip="base_clip",
                non_streaming_mode=not streaming, generate=gen, **facts)


def run_sampled(wrapper: tuple, arrays: dict) -> dict:
    """One sampled run (generation_config.json's parameters): its draws are not expected to be
    matched, but each step's scores before and after the processors are exact targets."""
    wrap, rec = wrapper
    ids = wrap._tokenize_texts([wrap._build_assistant_text(TEXT_EN)])[0]
    gen = wrap._merge_generate_kwargs(max_new_tokens=8)
    rec.reset()
    torch.manual_seed(SEED)
    codes = wrap.model.generate(input_ids=[ids], languages=["auto"], speakers=["vivian"], **gen)[0][0]
    steps, first = rec.calls["talker"], rec.calls["predictor"][: wrap.model.config.talker_config.num_code_groups - 1]
    arrays["sampled_codes"] = codes.numpy().astype(np.int64)
    arrays["sampled_talker_ids"] = steps[-1][0].numpy().astype(np.int64)
    arrays["sampled_talker_logits"] = torch.stack([s[1] for s in steps]).float().numpy()
    arrays["sampled_talker_scores"] = torch.stack([s[2] for s in steps]).float().numpy()
    arrays["sampled_predictor_logits"] = torch.stack([s[1] for s in first]).float().numpy()
    arrays["sampled_predictor_scores"] = torch.stack([s[2] for s in first]).float().numpy()
    return dict(name="sampled_vivian_auto_en_stream", model="custom_voice", text=TEXT_EN, language="auto",
                speaker="vivian", non_streaming_mode=False, generate=gen, seed=SEED, frames=int(codes.shape[0]),
                talker_steps=len(steps), note="talker step s saw sampled_talker_ids[:s] as its previous ids")


class Generated(Exception):
    """Stops generate_custom_voice at the model's generate, carrying the instruct_ids it was given."""

    def __init__(self, instruct_ids):
        super().__init__()
        self.instruct_ids = instruct_ids


def record_instruction_sizes(wrap) -> list[dict]:
    """What generate_custom_voice does with an instruction under each of INSTRUCTION_SIZES:
    "read" (it gives the model instruct_ids), "dropped" (it gives none), or the error it raises."""
    def stop(**kwargs):
        raise Generated(kwargs["instruct_ids"])

    kept = wrap.model.tts_model_size
    wrap.model.generate = stop
    outcomes = []
    try:
        for size in INSTRUCTION_SIZES:
            wrap.model.tts_model_size = size
            try:
                wrap.generate_custom_voice(TEXT_SHORT, "vivian", instruct=INSTRUCT)
            except Generated as generated:
                outcome = "dropped" if generated.instruct_ids[0] is None else "read"
            except Exception as error:  # noqa: BLE001 (what the reference raises is the record)
                outcome = type(error).__name__
            outcomes.append(dict(tts_model_size=size, instruct=outcome))
    finally:
        del wrap.model.generate
        wrap.model.tts_model_size = kept
    return outcomes


def record_text_splits(tmp: Path, custom_voice: Path) -> dict:
    """large_vocab.json: the reference's ids of TEXTS (in the assistant template) and of INSTRUCTION
    (in the instruction one) on the tiny custom-voice checkpoint with the large vocabulary, loaded
    as Qwen3TTSModel.from_pretrained loads it (processor with fix_mistral_regex=True), and the same
    tokenizer loaded with fix_mistral_regex=False (Qwen2's split, which the reference also gets from
    a hub id); then for each of text_split_cases.CASES the split the reference's processor class
    (what AutoProcessor picks for a qwen3_tts config.json) ends with, and its ids of TEXTS[0]."""
    processor_class = importlib.import_module("qwen_tts.core.models.processing_qwen3_tts").Qwen3TTSProcessor
    folder = tmp / "large-vocab"
    shutil.copytree(custom_voice, folder)
    write_large_vocab_tokenizer(folder)
    wrap = ref.Qwen3TTSModel.from_pretrained(str(folder))
    unfixed = processor_class.from_pretrained(str(folder), fix_mistral_regex=False)
    prompts = [wrap._build_assistant_text(text) for text in TEXTS]
    assert [reference_ids(wrap, processor_class.from_pretrained(str(folder), fix_mistral_regex=True), p)
            for p in prompts] == [reference_ids(wrap, wrap.processor, p) for p in prompts], "the class AutoProcessor picks"
    splits = {"qwen2": split_of(unfixed), "mistral-fix": split_of(wrap.processor)}
    assert splits["qwen2"] != splits["mistral-fix"]
    cases = []
    for name, case in SPLIT_CASES.items():
        try:
            processor = processor_class.from_pretrained(str(write_case(tmp / "split-cases" / name, **case)),
                                                        fix_mistral_regex=True)
        except Exception as error:  # noqa: BLE001 (what the reference raises is the record)
            cases.append(dict(name=name, **case, error=type(error).__name__))
            continue
        split = next(key for key, regex in splits.items() if regex == split_of(processor))
        cases.append(dict(name=name, **case, split=split, ids=reference_ids(wrap, processor, prompts[0])))
        print("text split", name, split, flush=True)
    instruction = wrap._build_instruct_text(INSTRUCTION)
    return dict(
        what="the reference's text ids on a vocabulary past 100,000 entries (tiny_random.large_vocabulary); ids: "
             "Qwen3TTSModel.from_pretrained's processor, qwen2_ids: the same tokenizer without fix_mistral_regex",
        versions={name: importlib.metadata.version(name) for name in ("qwen-tts", "transformers", "tokenizers")},
        vocab=wrap.processor.tokenizer.vocab_size, splits=splits,
        texts=[dict(text=text, ids=reference_ids(wrap, wrap.processor, p), qwen2_ids=reference_ids(wrap, unfixed, p))
               for text, p in zip(TEXTS, prompts)],
        instruction=dict(text=INSTRUCTION, ids=reference_ids(wrap, wrap.processor, instruction),
                         qwen2_ids=reference_ids(wrap, unfixed, instruction)),
        cases=cases)


def reference_ids(wrap, processor, prompt: str) -> list[int]:
    """The ids the reference's `_tokenize_texts` gives for `prompt` with `processor` as its processor."""
    kept, wrap.processor = wrap.processor, processor
    try:
        return wrap._tokenize_texts([prompt])[0][0].tolist()
    finally:
        wrap.processor = kept


def split_of(processor) -> str:
    """The regex of the processor's tokenizer's first pre-tokenizer (the split)."""
    return json.loads(processor.tokenizer.backend_tokenizer.to_str())["pre_tokenizer"]["pretokenizers"][0]["pattern"][
        "Regex"]


ARRAY_DOCS = {  # the first prefix a name starts with describes it
    "codes_clip_": "clip_cases: generate_voice_clone's greedy codes in a voice the reference cloned from base_clip "
                   "(create_voice_clone_prompt; in context, its reference frames are base_clip_codes) [T, 16] int64",
    "codes_": "greedy codes until end of speech (excluded) [T, 16] int64",
    "input_ids_": "reference tokenizer ids of <|im_start|>assistant\\n{text}<|im_end|>\\n<|im_start|>assistant\\n",
    "instruct_ids_": "ids of <|im_start|>user\\n{instruct}<|im_end|>\\n",
    "ref_ids_": "ids of <|im_start|>assistant\\n{ref_text}<|im_end|>\\n",
    "ref_codes_": "the in-context reference frames [R, 16] (deterministic, drawn in range)",
    "talker_embeds_": "the talker's prefill inputs_embeds [P, hidden]",
    "trailing_": "trailing text hidden [L, hidden]: added to the codec input at decode step s < L, else tts_pad",
    "audio_icl_clip_": "what generate_voice_clone returned (clip_cases, in context): the decode of base_clip_codes "
                       "+ codes_, cut at the reference frames' share",
    "audio_clip_": "clip_cases: the decode of codes_ alone (whole, one call); for an x-vector clone, what "
                   "generate_voice_clone returned",
    "audio_icl_": "reference decode of ref_codes + codes, cut at the reference frames' share (generate_voice_clone)",
    "audio_": "reference speech tokenizer decode of codes_ (whole, one call) at the case's sample_rate",
    "base_clip_codes": "reference speech tokenizer encode of base_clip [T, 16] int64",
    "base_clip": "synthetic 24 kHz clip the base cases' x-vector comes from",
    "clip16k_codes": "reference speech tokenizer encode of clip16k (sr=16000: it resamples first) [T, 16] int64",
    "clip16k_at_24k": "clip16k as the reference resampled it to 24 kHz (librosa, soxr_hq) before encoding",
    "clip16k": "a shorter synthetic clip at 16 kHz",
    "base_mel": "the reference's log-mel of base_clip [frames, 128] (speaker encoder input)",
    "base_xvector": "the reference speaker encoder's x-vector of base_clip [enc_dim]",
    "sampled_talker_ids": "code-0 ids of the sampled run (the first s are step s's previous ids)",
    "sampled_talker_logits": "talker logits per step before the processors [steps, vocab]",
    "sampled_talker_scores": "after the processors (processors.custom_voice.talker, in order) [steps, vocab]",
    "sampled_predictor_logits": "code predictor logits of the first frame's 15 steps before its processors",
    "sampled_predictor_scores": "after its processors (processors.custom_voice.predictor)",
    "sampled_codes": "the sampled run's codes (torch seed; not expected to be matched)",
}


def describe_array(name: str, value: np.ndarray) -> dict:
    what = next(doc for prefix, doc in ARRAY_DOCS.items() if name.startswith(prefix))
    return dict(shape=list(value.shape), dtype=str(value.dtype), what=what)


if __name__ == "__main__":
    main()
