"""A Qwen3-TTS checkpoint in the catalog, without an engine: its speakers under their own names,
OpenAI's and Deepgram's, per checkpoint type; its languages and instructions; and the front end's
refusals of them reaching every protocol as a 400 naming the parameter."""
from __future__ import annotations

import asyncio

import pytest

from api.config.settings import ApiSettings
from api.deepgram.errors import DeepgramError, turn_refused
from api.deepgram.voices import FEMININE, MASCULINE, UnknownModel, deepgram_voice
from api.openai.errors import ApiError
from api.speech.catalog import OPENAI_VOICE_ALIASES, Catalog
from api.speech.voice_choice import VoiceChoice
from api.speech.errors import SpeechError, speech_error
from api.speech.planning import SegmentPlanner
from api.speech.prompt_pool import PromptPool
from engine.outputs import EngineLimits
from model.families.base import BadInstructions, LanguageNotSupported
from model.families.orpheus.frontend import OrpheusFrontend
from model.families.qwen3_tts.frontend import DESIGNED_VOICE, Qwen3Frontend
from tests.api.qwen3_checkpoints import qwen3_checkpoint

SPEAKERS = ("vivian", "ryan", "uncle_fu", "eric", "dylan")  # the tiny checkpoint's, in its order


@pytest.fixture(scope="module")
def frontends(chorus_cache, tmp_path_factory) -> dict[str, Qwen3Frontend]:
    root = tmp_path_factory.mktemp("qwen3-types")
    return {kind: Qwen3Frontend.from_folder(f"tiny-{kind}", qwen3_checkpoint(root, kind))
            for kind in ("custom_voice", "voice_design", "base")}


def test_custom_voice_speakers_languages_and_aliases(frontends):
    catalog = Catalog(frontends["custom_voice"])
    assert catalog.voices == SPEAKERS and catalog.reads_instructions and not catalog.word_timestamps
    assert catalog.languages[0] == "auto" and {"english", "chinese"} <= set(catalog.languages)
    # An alias goes to its Qwen3 speaker of that character where the checkpoint has it (ash: ryan,
    # onyx: uncle_fu), else to speaker i mod n (alloy, the first, to the first).
    assert catalog.voice_aliases["ash"] == "ryan" and catalog.voice_aliases["onyx"] == "uncle_fu"
    assert catalog.voice_aliases["alloy"] == "vivian"
    assert set(catalog.voice_aliases) == set(OPENAI_VOICE_ALIASES)
    assert set(catalog.voice_aliases.values()) <= set(SPEAKERS)
    assert catalog.voice_choice("Ryan", "English", "warmly") == VoiceChoice("ryan", "english", "warmly")
    assert catalog.voice_choice("alloy", "auto") == VoiceChoice("vivian", None, None)


def test_voice_design_has_one_voice_every_alias_means(frontends):
    catalog = Catalog(frontends["voice_design"])
    assert catalog.voices == (DESIGNED_VOICE,) and catalog.reads_instructions
    assert set(catalog.voice_aliases.values()) == {DESIGNED_VOICE}
    assert {deepgram_voice(f"aura-2-{name}-en", catalog) for name in FEMININE + MASCULINE} == {DESIGNED_VOICE}


def test_base_has_no_voice_of_its_own_and_says_how_to_clone_one(frontends):
    catalog = Catalog(frontends["base"])
    assert catalog.voices == () and catalog.voice_aliases == {} and not catalog.reads_instructions
    with pytest.raises(SpeechError) as refused:
        catalog.voice_choice("alloy")
    assert (refused.value.status, refused.value.param) == (404, "voice")
    assert "'alloy'" in refused.value.message and "POST /v1/audio/voices" in refused.value.message
    with pytest.raises(UnknownModel, match="no voices"):
        deepgram_voice("aura-2-thalia-en", catalog)


def test_deepgram_ids_map_to_speakers_of_their_kind(frontends):
    catalog = Catalog(frontends["custom_voice"])
    assert {deepgram_voice(f"aura-2-{name}-en", catalog) for name in FEMININE} == {"vivian"}
    assert {deepgram_voice(f"aura-2-{name}-en", catalog) for name in MASCULINE} == {"ryan", "uncle_fu", "eric", "dylan"}
    assert deepgram_voice("Dylan", catalog) == "dylan" and deepgram_voice("tts-1", catalog) == "vivian"


def test_an_unknown_language_is_a_400_naming_it_in_every_protocol(frontends):
    with pytest.raises(SpeechError) as refused:
        Catalog(frontends["custom_voice"]).voice_choice("ryan", "klingon")
    error = refused.value
    assert (error.status, error.code, error.param) == (400, "unsupported_value", "language")
    assert "english" in error.message
    assert (ApiError.of(error).param, DeepgramError.of(error).err_code) == ("language", "INVALID_QUERY_PARAMETER")


@pytest.mark.parametrize("exc, param, code", [
    (LanguageNotSupported("klingon", ("auto", "english")), "language", "unsupported_value"),
    (BadInstructions("a voice_design checkpoint needs `instructions` describing the voice"), "instructions",
     "invalid_value"),
])
def test_the_front_ends_refusals_map_to_400s_naming_the_parameter(exc, param, code):
    error = speech_error(exc, 1)
    assert (error.status, error.code, error.param) == (400, code, param)
    message, outcome = turn_refused(error)
    assert (message["type"], message["variant"], outcome) == ("Error", "INVALID_QUERY_PARAMETER", "invalid")


def test_planning_raises_what_the_front_end_refuses_whatever_the_text(frontends):
    """Missing instructions are no "nothing to speak": the first segment raises the refusal."""
    frontend = frontends["voice_design"]

    async def first_segment(voice: VoiceChoice):
        async with PromptPool(frontend.prepare) as pool:
            planner = SegmentPlanner(pool, frontend, ApiSettings(), EngineLimits(4096, 12.5))
            return await (await planner.plan("Hello there.", voice)).next()

    with pytest.raises(BadInstructions):
        asyncio.run(first_segment(VoiceChoice(DESIGNED_VOICE)))
    segment = asyncio.run(first_segment(VoiceChoice(DESIGNED_VOICE, "english", "a calm, low voice")))
    assert segment.prompt.language == "english" and segment.prompt.instructions == "a calm, low voice"


def test_orpheus_reads_english_and_ignores_instructions():
    from model.config import ModelConfig
    from model.loader import load_frontend
    from model.tiny_random import ensure_tiny_random

    frontend = load_frontend(ModelConfig(model=str(ensure_tiny_random())))
    assert isinstance(frontend, OrpheusFrontend) and frontend.languages == ("auto", "english")
    plain = frontend.prepare("Hi.", "tara")
    assert frontend.prepare("Hi.", "tara", language="English", instructions="shout").token_ids == plain.token_ids
    with pytest.raises(LanguageNotSupported):
        frontend.prepare("Hi.", "tara", language="german")
    # The API drops instructions for a model that does not read them (accepted and ignored).
    assert Catalog(frontend).voice_choice("tara", instructions="shout") == VoiceChoice("tara")
