"""`chorus serve` flags that belong to the HTTP layer."""
from __future__ import annotations

from api.cli import build_parser


def test_api_key_flags_files_and_environment(monkeypatch, tmp_path):
    from api.config.serve_args import api_keys_from_args

    def keys(*flags):
        return api_keys_from_args(build_parser().parse_args(["serve", *flags]))

    monkeypatch.delenv("CHORUS_API_KEY", raising=False)
    assert keys() == ()
    assert keys("--api-key", "k1", "--api-key", "k2", "--api-key", "k1") == ("k1", "k2")
    monkeypatch.setenv("CHORUS_API_KEY", "from-env")
    assert keys() == ("from-env",)
    assert keys("--api-key", "k1") == ("k1",)  # a flag replaces the environment's key
    listed = tmp_path / "keys"
    listed.write_text("# operators\nalpha\n\n  beta  \n#gamma\n")
    assert keys("--api-key", "k1", "--api-keys-file", str(listed)) == ("k1", "alpha", "beta")


def test_the_voices_dir_defaults_to_the_users_data_home(monkeypatch, tmp_path):
    monkeypatch.delenv("CHORUS_VOICES_DIR", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert build_parser().parse_args(["serve"]).voices_dir == str(tmp_path / "chorus" / "voices")
    monkeypatch.setenv("CHORUS_VOICES_DIR", "/srv/voices")
    assert build_parser().parse_args(["serve"]).voices_dir == "/srv/voices"


def test_engine_flags_reach_the_engine_config():
    import argparse

    from api.config.engine_args import add_engine_args, engine_config_from_args

    parser = argparse.ArgumentParser()
    add_engine_args(parser)
    defaults = engine_config_from_args(parser.parse_args([]))
    assert defaults.gpu.cuda_graphs and defaults.gpu.sample_in_graph and defaults.gpu.codec_graphs
    assert defaults.cache.kv_cache_dtype == "auto" and not defaults.gpu.fused_ops
    config = engine_config_from_args(parser.parse_args([
        "--no-cuda-graphs", "--no-sample-in-graph", "--no-overlap-codec", "--no-codec-graphs", "--fused-ops",
        "--kv-cache-dtype", "fp8_e4m3", "--attention-backend", "xformers",
    ]))
    gpu = config.gpu
    assert not (gpu.cuda_graphs or gpu.sample_in_graph or gpu.overlap_codec or gpu.codec_graphs)
    assert gpu.fused_ops and config.cache.kv_cache_dtype == "fp8_e4m3"
    assert config.model.attention_backend == "xformers"


def test_streaming_flags_set_one_field_each_and_default_to_the_codec():
    import argparse

    from api.config.engine_args import add_engine_args, engine_config_from_args
    from engine.audio.config import StreamingConfig

    parser = argparse.ArgumentParser()
    add_engine_args(parser)
    assert engine_config_from_args(parser.parse_args([])).streaming == StreamingConfig()
    config = engine_config_from_args(parser.parse_args([
        "--first-chunk-frames", "2", "--chunk-frames", "16", "--grow-chunks",
        "--left-context-frames", "5", "--lookahead-frames", "3", "--first-lookahead-frames", "2", "--crossfade-samples", "64",
    ]))
    assert config.streaming == StreamingConfig(first_chunk_frames=2, chunk_frames=16,
                                               grow_chunks=True, left_context_frames=5, lookahead_frames=3,
                                               first_lookahead_frames=2, crossfade_samples=64)
    assert engine_config_from_args(parser.parse_args(["--no-grow-chunks"])).streaming.grow_chunks is False


def test_say_speaks_every_segment_through_planning(chorus_cache, tmp_path):
    """`chorus say` plans like the API: one engine request per segment, each `--max-tokens` long
    (tiny-random's constrained tokens never stop early: 14 tokens are 2 frames of 2048 samples)."""
    import wave

    from api.cli import main
    from api.speech.text_split import plan_texts
    from model.tiny_random import ensure_tiny_random

    text = "First one. Second one here. Third one comes now. And a fourth to end it."
    out = tmp_path / "say.wav"
    code = main(["say", text, "-o", str(out), "--model", str(ensure_tiny_random()), "--device", "cpu",
                 "--max-tokens", "14", "--seed", "1", "--num-kv-blocks", "256", "--num-threads", "1"])
    assert code == 0
    with wave.open(str(out)) as wav:
        assert wav.getnframes() == len(plan_texts(text, 30, 1000)) * 2 * 2048


def test_say_takes_a_language_and_instructions(chorus_cache, tmp_path, capsys):
    """A Qwen3-TTS speaker with both (the tiny checkpoint: two frames of 640 samples at 8 kHz); a
    language the model does not read is refused by name, before any audio."""
    import wave

    from api.cli import main

    out = tmp_path / "say.wav"
    flags = ["--model", "tiny-random-qwen3", "--device", "cpu", "--max-tokens", "2", "--num-kv-blocks", "64",
             "--num-threads", "1", "-o", str(out), "--voice", "Ryan"]
    assert main(["say", "Hi.", *flags, "--language", "english", "--instructions", "Warmly."]) == 0
    with wave.open(str(out)) as wav:
        assert (wav.getframerate(), wav.getnframes()) == (8000, 2 * 640)
    assert main(["say", "Hi.", *flags, "--language", "klingon"]) == 2
    assert "language 'klingon'" in capsys.readouterr().err


def test_say_speaks_in_a_voice_of_the_library(chorus_cache, tmp_path, capsys):
    """`chorus say --voice NAME` reads the library `chorus serve` keeps (--voices-dir); a name it
    does not hold is refused by name."""
    import time
    import wave

    import numpy as np

    from api.cli import main
    from api.voices.store import StoredVoice, VoiceFolder
    from model.config import ModelConfig
    from model.loader import load_frontend
    from tests.api.voice_clips import GOLDEN

    with np.load(GOLDEN) as golden:
        clip = golden["base_clip"]
    cloner = load_frontend(ModelConfig(model="tiny-random-qwen3-base")).voice_cloner()
    voice = StoredVoice(id="voice_" + "a" * 24, name="Ann", owner=None, model="tiny-random-qwen3-base",
                        created_at=int(time.time()), seconds=1.5, language=None, description=None,
                        clone=cloner.clone(clip))
    VoiceFolder(tmp_path / "voices").write(voice, clip, 24000)
    out = tmp_path / "say.wav"
    flags = ["--model", "tiny-random-qwen3-base", "--device", "cpu", "--max-tokens", "2", "--num-kv-blocks", "64",
             "--num-threads", "1", "-o", str(out), "--voices-dir", str(tmp_path / "voices")]
    assert main(["say", "Hi.", *flags, "--voice", "ann"]) == 0
    with wave.open(str(out)) as wav:
        assert wav.getnframes() == 2 * 640
    assert main(["say", "Hi.", *flags, "--voice", "Nobody"]) == 2
    assert "'Nobody'" in capsys.readouterr().err
