"""`chorus`: say (text → WAV through the engine) and serve (the HTTP server). The load benchmark
and the profiler are the benchmarks' own commands: `chorus-bench bench|profile` (or
`python -m benchmarks bench|profile`)."""
from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import time
import wave
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from api.config.engine_args import add_engine_args, engine_config_from_args
from api.config.serve_args import (add_lexicon_arg, add_prompt_args, add_serve_args, default_voices_dir,
                                  serve_settings_from_args)
from api.config.settings import ApiSettings
from api.http.auth import owner_of
from api.http.draining import Drain
from api.http.protocol import BoundedWebSocketProtocol, bounded_h11
from api.speech.catalog import Catalog
from api.speech.early_refusal import EarlyRefusal
from api.speech.errors import ENGINE_DEAD, UNSPEAKABLE, SpeechError
from api.speech.markup import server_lexicon
from api.speech.planning import SegmentPlanner
from api.speech.prompt_pool import PromptPool
from api.speech.start import start_speech
from api.speech.synthesis import SynthesisFailed
from api.voices.library import VoiceLibrary
from engine.client import EngineClient


def pcm16(samples: np.ndarray) -> bytes:
    """float32 in [-1, 1] → 16-bit signed little-endian."""
    return (np.clip(samples, -1.0, 1.0) * 32767.0).astype("<i2").tobytes()


async def _say(args: argparse.Namespace) -> int:
    settings = ApiSettings(prompt_workers=args.prompt_workers)
    async with EngineClient(engine_config_from_args(args)) as client, \
            PromptPool(client.frontend.prepare, settings.prompt_workers) as pool:
        if client.frontend.model_speed(args.speed) != args.speed:
            low, high = client.frontend.speed_range
            print(f"error: {client.frontend.model_name} speaks at speeds {low}-{high}; the HTTP API "
                  "time-stretches beyond that", file=sys.stderr)
            return 2
        # One speech on an engine of its own: no drain ever refuses it, nor does early refusal
        # (admission off, as the engine would admit it).
        try:
            lexicon = server_lexicon(args.lexicon, client.frontend)
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        services = SimpleNamespace(engine=client, planner=SegmentPlanner(pool, client.frontend, settings, client.limits),
                                   settings=settings, drain=Drain(), early_refusal=EarlyRefusal(admission_on=False),
                                   lexicon=lexicon)
        started = time.monotonic()
        try:
            library = VoiceLibrary.open(Path(args.voices_dir).expanduser(), client.frontend, pool.run)
            catalog = Catalog(client.frontend, library)
            owner = owner_of(args.api_key) if args.api_key else None
            voice = catalog.voice_choice(args.voice or catalog.default_voice, args.language, args.instructions,
                                         owner=owner, normalize=args.normalize)
            synthesis, _ = await start_speech(services, args.text, voice, args.speed, args.seed, args.max_tokens)
        except SpeechError as exc:
            print(f"error: {exc.reason}", file=sys.stderr)
            # 1: the speech failed (nothing to speak, the engine gone); 2: a request refused.
            return 1 if exc.code in (UNSPEAKABLE, ENGINE_DEAD) else 2
        try:
            first_audio = time.monotonic() - started
            samples = 0
            with wave.open(str(args.output), "wb") as wav:
                wav.setnchannels(1)
                wav.setsampwidth(2)
                wav.setframerate(client.sample_rate)
                async for pcm in synthesis.pcm():
                    wav.writeframes(pcm16(pcm))
                    samples += pcm.size
        except SynthesisFailed as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        finally:
            synthesis.close()
    seconds = samples / client.sample_rate
    print(f"wrote {args.output}: {seconds:.2f} s of audio, time to first audio {first_audio:.3f} s, "
          f"RTF {(time.monotonic() - started) / max(seconds, 1e-9):.3f}", file=sys.stderr)
    return 0


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from api.app import create_app
    from api.deepgram.socket import ws_max_size
    from api.http.server import DrainingServer

    if args.replicas is not None:
        from api.ray_serve.local import run_replicas

        return run_replicas(args, args.serve_flags)
    settings = serve_settings_from_args(args)
    app = create_app(engine_config_from_args(args), settings)
    config = uvicorn.Config(app, host=args.host, port=args.port, log_level="info",
                            http=bounded_h11(args.head_timeout_seconds),
                            ws=BoundedWebSocketProtocol, ws_max_size=ws_max_size(settings))
    server = DrainingServer(config, app, args.drain_timeout)
    app.state.request_shutdown = lambda: setattr(server, "should_exit", True)
    server.run()
    return getattr(app.state, "exit_code", 0)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="chorus", description="Continuous-batching TTS serving")
    sub = parser.add_subparsers(dest="command", required=True)
    say = sub.add_parser("say", help="synthesize text to a WAV file through the engine")
    say.add_argument("text")
    say.add_argument("-o", "--output", type=Path, default=Path("out.wav"))
    say.add_argument("--voice", default=None, help="a voice of the model, an OpenAI voice name, or the name or id "
                                                  "of a voice of the library (default: the model's first)")
    say.add_argument("--voices-dir", default=os.environ.get("CHORUS_VOICES_DIR") or str(default_voices_dir()),
                     help="the voice library `chorus serve` keeps (default: as serve's)")
    say.add_argument("--api-key", default=None, help="with a library of several keys: the key whose voices --voice "
                                                    "names (default: the voices made without a key)")
    say.add_argument("--language", default=None, help="the language the text is read in (default: auto)")
    say.add_argument("--instructions", default=None,
                     help="how to speak, for a model that reads instructions (Qwen3-TTS CustomVoice: optional; "
                          "VoiceDesign: the voice's description, required)")
    say.add_argument("--normalize", action=argparse.BooleanOptionalAction, default=None,
                     help="read the text through the English normalizer first ('$3.50' as 'three dollars and "
                          "fifty cents'): for models that read raw text (Orpheus, Qwen3-TTS); joe always does")
    add_lexicon_arg(say)
    say.add_argument("--seed", type=int, default=None)
    say.add_argument("--max-tokens", type=int, default=None, help="the most outputs of each segment")
    say.add_argument("--speed", type=float, default=1.0, help="speaking rate (models with rate control: joe)")
    add_prompt_args(say)
    add_engine_args(say)
    say.set_defaults(engine_mode="inproc")
    serve = sub.add_parser("serve", help="start the HTTP server")
    add_serve_args(serve)
    return parser


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.command == "say":
        try:
            return asyncio.run(_say(args))
        except ValueError as exc:  # bad text or voice, a refused request: say why, no traceback
            print(f"error: {exc}", file=sys.stderr)
            return 2
    # Ray Serve replicas read the very flags this server was given.
    argv = sys.argv[1:] if argv is None else argv
    args.serve_flags = argv[argv.index("serve") + 1:]
    return _serve(args)


if __name__ == "__main__":
    sys.exit(main())
