"""The pure position layout of Qwen3-TTS prompts (model/families/qwen3_tts/layout.py), mode by
mode, on the tiny checkpoint's config (no files, no weights)."""
from __future__ import annotations

import pytest

from model.families.qwen3_tts import tiny_random
from model.families.qwen3_tts.config import Qwen3TtsConfig
from model.families.qwen3_tts.layout import (LanguageNotSupported, ReferenceClip, build_tracks,
                                             resolve_language_id)
from model.families.qwen3_tts.prompt import SPEAKER_VECTOR

CONFIG = Qwen3TtsConfig.from_dicts(tiny_random.model_config(base=False))
C, T = CONFIG.codec, CONFIG.text
ROLE = [T.im_start, 7, 10]  # what the template's "<|im_start|>assistant\n" stands for here
TEXT = [40, 41, 42]
AUTO_HEAD = [(C.nothink,), (C.think_bos,), (C.think_eos,)]


def test_streaming_custom_voice_reads_the_first_text_token_with_codec_bos():
    tracks = build_tracks(CONFIG, ROLE, TEXT, speaker=(1017,))
    assert tracks.text_ids == [*ROLE, T.tts_pad, T.tts_pad, T.tts_pad, T.tts_pad, T.tts_bos, 40]
    assert tracks.codec == [(), (), (), *AUTO_HEAD, (1017,), (C.pad,), (C.bos,)]
    assert tracks.trailing_ids == [41, 42, T.tts_eos]


def test_a_named_language_adds_the_think_tag_and_its_id():
    tracks = build_tracks(CONFIG, ROLE, TEXT, language_id=CONFIG.languages["german"])
    assert tracks.codec[3:8] == [(C.think,), (C.think_bos,), (CONFIG.languages["german"],), (C.think_eos,), (C.pad,)]
    assert tracks.text_ids[3:8] == [T.tts_pad] * 4 + [T.tts_bos]


def test_non_streaming_puts_all_text_in_the_prompt():
    tracks = build_tracks(CONFIG, ROLE, TEXT, non_streaming=True)
    assert tracks.text_ids[6:] == [T.tts_bos, 40, 41, 42, T.tts_eos, T.tts_pad]
    assert tracks.codec[6:] == [(C.pad,)] * 5 + [(C.bos,)]
    assert tracks.trailing_ids == []


def test_an_instruction_turn_comes_first_on_the_text_track_only():
    instruction = [T.im_start, 8, 10, 50, 51, T.im_end, 10]
    plain = build_tracks(CONFIG, ROLE, TEXT)
    tracks = build_tracks(CONFIG, ROLE, TEXT, instruction_ids=instruction)
    assert tracks.text_ids == instruction + plain.text_ids
    assert tracks.codec == [()] * len(instruction) + plain.codec
    assert tracks.keys[len(instruction):] == plain.keys


def test_an_x_vector_takes_the_speaker_position():
    tracks = build_tracks(CONFIG, ROLE, TEXT, speaker=(SPEAKER_VECTOR,))
    assert tracks.codec[6] == (SPEAKER_VECTOR,)
    assert len(tracks.keys) == len(ROLE) + 3 + 1 + 2  # role, tags, speaker, pad, bos


FRAMES = [tuple(range(i, i + 16)) for i in range(3)]


def test_in_context_streaming_pairs_text_with_frames_and_leaves_the_rest_trailing():
    tracks = build_tracks(CONFIG, ROLE, TEXT, speaker=(SPEAKER_VECTOR,), reference=ReferenceClip([30, 31], FRAMES))
    # to read: 30 31 40 41 42 eos (6) against bos + 3 frames (4)
    assert tracks.text_ids[-4:] == [30, 31, 40, 41]
    assert tracks.codec[-4:] == [(C.bos,), *FRAMES]
    assert tracks.trailing_ids == [42, T.tts_eos]


def test_in_context_streaming_pads_a_short_text_with_tts_pad():
    tracks = build_tracks(CONFIG, ROLE, [40], speaker=(SPEAKER_VECTOR,), reference=ReferenceClip([30], FRAMES))
    assert tracks.text_ids[-4:] == [30, 40, T.tts_eos, T.tts_pad]
    assert tracks.trailing_ids == []


def test_in_context_non_streaming_reads_all_text_then_all_frames():
    tracks = build_tracks(CONFIG, ROLE, TEXT, speaker=(SPEAKER_VECTOR,), non_streaming=True,
                          reference=ReferenceClip([30], FRAMES))
    assert tracks.text_ids[8:] == [30, 40, 41, 42, T.tts_eos] + [T.tts_pad] * 4
    assert tracks.codec[8:] == [(C.pad,)] * 5 + [(C.bos,), *FRAMES]
    assert tracks.trailing_ids == []


def test_keys_separate_different_inputs_and_match_equal_ones():
    tracks = build_tracks(CONFIG, ROLE, [40, 40], speaker=(SPEAKER_VECTOR,), non_streaming=True,
                          reference=ReferenceClip([40], [FRAMES[0], FRAMES[0]]))
    inputs = list(zip(tracks.text_ids, tracks.codec))
    for i, a in enumerate(inputs):
        for j, b in enumerate(inputs):
            if tracks.keys[i] == tracks.keys[j]:
                assert a == b
            elif a == b:
                assert len(a[1]) > 1, "only frames are keyed by their place in the clip"
    assert all(0 <= key < 2 ** 63 for key in tracks.keys)


@pytest.mark.parametrize(("language", "speaker", "expected"), [
    (None, "vivian", None), ("English", "vivian", "english"), ("chinese", "vivian", "chinese"),
    ("chinese", "eric", "sichuan_dialect"), ("auto", "dylan", "beijing_dialect"), ("english", "eric", "english"),
    ("german", None, "german"),
])
def test_languages_resolve_as_the_reference_does_with_dialect_speakers(language, speaker, expected):
    assert resolve_language_id(CONFIG, language, speaker) == (expected and CONFIG.languages[expected])


@pytest.mark.parametrize("language", ["klingon", "sichuan_dialect"])
def test_an_unknown_language_names_itself_and_the_supported_ones(language):
    with pytest.raises(LanguageNotSupported) as refused:
        resolve_language_id(CONFIG, language)
    assert refused.value.language == language
    assert refused.value.available == ("auto", "english", "german", "chinese", "japanese")
    assert language in str(refused.value) and "japanese" in str(refused.value)


@pytest.mark.parametrize(("kwargs", "message"), [
    (dict(text_ids=[]), "nothing to speak"),
    (dict(speaker=(5, 6)), "speaker entry"),
    (dict(speaker=(CONFIG.talker_vocab_size,)), "speaker entry"),
    (dict(reference=ReferenceClip([1], [])), "at least one"),
    (dict(reference=ReferenceClip([1], [(1,) * 15])), "has 15 codes"),
    (dict(reference=ReferenceClip([1], [(CONFIG.predictor_vocab_size,) * 16])), "outside"),
])
def test_malformed_inputs_are_refused(kwargs, message):
    args = dict(text_ids=TEXT) | kwargs
    with pytest.raises(ValueError, match=message):
        build_tracks(CONFIG, ROLE, **args)
